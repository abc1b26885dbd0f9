// Package mutate is Virtstation's mutating admission webhook for KubeVirt
// VirtualMachines.
//
// The mutation is a pure function of the VM and a read-only view of cluster
// state (Cluster), run as a list of steps over one typed view of the VM (a
// kubevirt.io/api VirtualMachine, decoded case-sensitively). The JSON patch
// is computed once, at the end, from the fields the steps changed, and
// carried onto the request's raw object, so fields the Go types do not know
// survive; applying it twice equals applying it once. Admit, the whole
// admission of one request, backs both the webhook and `virtstation
// render`.
//
// The webhook writes nothing and reads no Secret: what a VM needs in the
// cluster, its per-VM Secrets, is written by reconcilers from the stored VM
// (packages userdata and sshkeys), and the report sub-package emits an Event
// for each VM it mutated.
package mutate
