// Package mutate is Virtstation's mutating admission webhook for KubeVirt
// VirtualMachines.
//
// The mutation is a pure function of the VM and a read-only view of cluster
// state (Cluster), run as a list of steps over the request's raw JSON object,
// so fields the Go types do not know survive and applying it twice equals
// applying it once. The same function backs `virtstation render`.
//
// What the webhook cannot do within a request runs as reconcilers in the
// sub-packages: secretgc adopts and sweeps the per-VM Secrets it writes, and
// report emits an Event for each VM it mutated.
package mutate
