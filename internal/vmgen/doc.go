// Package vmgen generates varied managed KubeVirt VirtualMachines for
// Virtstation's property test (test/property), with the cluster objects each
// one needs: data disks, Secrets, key Secrets and other VMs.
//
// Generation is deterministic: every choice is drawn from a Source, so a
// seed and a case index (NewSource) or a fuzzer's bytes (BytesSource) give
// the same Case every time. A Case is valid to KubeVirt before Virtstation
// touches it: the generator keeps the VM's own devices within what KubeVirt
// v1.9.0's admission accepts for the VM's architecture, and leaves
// everything else (buses of data disks, video types, user-data sizes near
// KubeVirt's 2,048-byte inline limit) to vary freely in the virtstation.io
// annotations, where only Virtstation reads them.
package vmgen
