// Package janitor deletes what the bridge leaves behind in its namespace
// once nothing can need it: the session Leases, activity Leases and SSH
// host-key pins of VMs that no longer exist, and the heartbeat Leases of
// replicas long gone (every bridge pod that ever ran wrote one).
//
// Every replica sweeps on its own; deletes carry the UID and
// resourceVersion read, so a Lease taken or a pin written since is never
// deleted, and two replicas deleting the same object is harmless. What to
// delete is decided by session.Classify, activity.LeaseVM and
// sshbridge.PinnedVM; this
// package holds only the I/O.
package janitor
