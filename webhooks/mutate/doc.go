// Package mutate is Virtstation's mutating admission webhook for KubeVirt
// VirtualMachines.
//
// The mutation is a pure function of the VM and a read-only view of cluster
// state (Cluster), run as a list of steps over the request's raw JSON object,
// so fields the Go types do not know survive and applying it twice equals
// applying it once. The same function backs `virtstation render`.
//
// The webhook writes nothing and reads no Secret: what a VM needs in the
// cluster, its per-VM Secrets, is written by reconcilers from the stored VM
// (packages userdata and sshkeys), and the report sub-package emits an Event
// for each VM it mutated.
package mutate
