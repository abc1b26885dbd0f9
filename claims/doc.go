// Package claims keeps data disks exclusive: a DataVolume or PVC labelled
// virtstation.io/data-disk=true is attached writable by at most one VM, or
// read-only (cdrom, readOnly) by any number of VMs, never both.
//
// A claim lives on the disk object itself, as annotations:
//
//	virtstation.io/claimed-by: <ns>/<vm>          the one writable claim
//	virtstation.io/shared-by:  <ns>/<vm>,<ns>/<vm> read-only claims, sorted
//	virtstation.io/claimed-at: <RFC 3339>         when a claim was last written
//	virtstation.io/claim-uids: <ns>/<vm>=<uid>,…   the metadata.uid each claim is bound to
//
// A claim is bound to the uid of the VM it was written for (WithUID): only
// a stored VM with the claim's namespace, name and uid holds it. A claim
// written for a VM that is never stored (a create rejected by a later
// admission step, or an AdmissionReview forged straight to the webhook),
// or for an earlier VM of the same name, is held by nobody and released
// after the grace period. Claims written before uids were recorded have no
// entry and are bound by name.
//
// Read parses them into a State. Claim and Release write them with a JSON
// merge patch that carries the resourceVersion the object was read at, so
// of N writers racing on one disk exactly one succeeds and the others get
// ErrConflict (and re-read) or ErrClaimed (they read the winner's claim).
// Whether a claim is allowed is the policy's decision; Claim only refuses,
// as a last line of defence, to break exclusivity.
//
// Claims are written at admission, before the VM exists, so a claim whose VM
// does not exist is not stale until it is older than a grace period
// (DefaultGrace, seconds): the VM's create may still be in flight, or it
// may have been rejected by a later admission step. The grace covers only
// the gap between the validating admission and the VM being stored. The Releaser reconciler removes claims whose VM is gone, or
// no longer attaches the disk, once no VirtualMachineInstance in the
// namespace uses the disk and the grace period has passed. The DeletionGuard
// webhook refuses to delete a disk that an existing VM claims or a VMI uses.
//
// The decisions are pure functions over a State and the facts gathered
// about its claimants (Decide, Attaches, UsesDisk); the reconciler and the
// webhook only gather facts, decide, and write.
package claims
