// Package sshkeys keeps the per-VM SSH key Secrets that KubeVirt's
// qemuGuestAgent access-credential propagation reads in sync with the
// namespace's key Secrets.
//
// A Secret labelled virtstation.io/ssh-public-key=true holds public keys, one
// authorized_keys line a line, for every VM in its namespace. A managed VM
// with the virtstation.io/ssh-user annotation and qemuGuestAgent propagation
// (the default) reads its keys from the Secret "<vm>-ssh-keys", data key
// "authorized_keys". The mutating webhook creates that Secret at admission,
// so it exists before the first start, but cannot make the VM its owner: on
// CREATE the VM has no UID yet. The Reconciler here adopts the Secret, makes
// the VM its controller owner, and rewrites its data whenever a key Secret is
// added, changed or deleted, so additions, rotations and deletions reach
// running guests live. A Secret of that name that virtstation does not manage
// is never touched; the VM gets a Warning Event instead.
//
// The decisions (which lines are keys, what the Secret should hold, whether an
// existing Secret is ours) are pure functions: Collect, Render, Desired and
// Wants. The Reconciler only reads, compares and writes.
//
// A VM that stops wanting keys (annotation removed, propagation switched to
// cloudInit, label removed) keeps its Secret unchanged: the Secret is owned by
// the VM and goes with it through garbage collection, and leaving it alone
// never takes keys away from a running guest behind the user's back.
package sshkeys
