// Package sshkeys keeps the per-VM SSH key Secrets that KubeVirt's
// qemuGuestAgent access-credential propagation reads in sync with the
// namespace's key Secrets.
//
// A Secret labelled virtstation.io/ssh-public-key=true holds public keys, one
// authorized_keys line a line, for every VM in its namespace. A managed VM
// with the virtstation.io/ssh-user annotation and qemuGuestAgent propagation
// (the default) reads its keys from the Secret "<vm>-ssh-keys", data key
// "authorized_keys". The mutating webhook only points the VM at that Secret;
// it writes nothing. The Reconciler here writes the Secret once the VM is
// stored, with the VM as its controller owner (the VM's first start waits
// for it: KubeVirt mounts it), and rewrites its data whenever a key Secret
// is added, changed or deleted, so additions, rotations and deletions reach
// running guests live. A Secret of that name without an owner, as earlier
// versions of the webhook created, is adopted. A Secret of that name that virtstation does not manage
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
