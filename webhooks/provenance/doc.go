// Package provenance decides whether an admission request for a
// VirtualMachine could be the API server's own before a webhook acts on it
// with side effects (the Secrets the mutating webhook writes, the disk
// claims the validating webhook writes).
//
// A webhook cannot tell from an AdmissionReview alone who sent it: any
// caller that reaches the webhook Service can POST one. So before any write
// the webhook reads the VM from the API server and checks the request
// against it:
//
//   - CREATE: no VM of that name exists. A real create of an existing name
//     fails with AlreadyExists once admission is done, so nothing may be
//     written for it first.
//   - UPDATE: the stored VM has oldObject's UID and resourceVersion. A real
//     update is admitted against the object the API server holds; a forged
//     one cannot know an unreadable VM's UID, and a stale or replayed one
//     carries an old resourceVersion. When the API server admitted against
//     a cached copy that was stale, the denial makes it re-read and retry
//     (its storage layer retries an update whose admission failed on stale
//     data), and the Conflict answer makes clients retry too.
//
// What this cannot catch is a forged CREATE of a VM that does not exist:
// the only proof of the API server is its client certificate (see the
// webhook's --client-ca-file and docs/security.md).
package provenance
