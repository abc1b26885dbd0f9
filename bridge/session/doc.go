// Package session keeps bridge sessions exclusive: at most one session per
// VM per mode (console, vnc, ssh), across every bridge replica, with
// take-over. A session slot is a coordination.k8s.io/v1 Lease in the
// bridge's own namespace; replicas agree through the API server alone.
//
// # Lease layout
//
// One Lease per Key (VM namespace, VM name, mode):
//
//	name:        vs-<mode>-<first 16 hex digits of sha256("<ns>/<vm>")>
//	labels:      app.kubernetes.io/managed-by: virtstation-bridge
//	             virtstation.io/vm: <the same 16 hex digits>
//	annotations: virtstation.io/vm-namespace: <ns>
//	             virtstation.io/vm-name:      <vm>
//	             virtstation.io/mode:         <mode>
//	             virtstation.io/user:         <holder's user name, from TokenReview>
//	             virtstation.io/vmi-uid:      <uid of the VMI the bridge read before writing>
//	             virtstation.io/incarnation:  <the holding replica's heartbeat incarnation>
//	             virtstation.io/taken-over-from: <holder identity a take-over displaced>
//	spec:        holderIdentity:       <replica>/<session id>, or reserved/<user>, or empty
//	             acquireTime:          when the holder got the slot ("since")
//	             renewTime:            when the holder got the slot; never renewed
//	             leaseDurationSeconds: the lease duration (a reservation: its TTL)
//	             leaseTransitions:     how often the holder changed
//
// and one heartbeat Lease per bridge replica:
//
//	name:        vs-replica-<first 16 hex digits of sha256("<replica>")>
//	labels:      app.kubernetes.io/managed-by: virtstation-bridge
//	             virtstation.io/role: replica-heartbeat
//	annotations: virtstation.io/replica:     <replica>
//	             virtstation.io/incarnation: <random, new at every start>
//	spec:        holderIdentity:       <replica>
//	             acquireTime:          when this incarnation began
//	             renewTime:            the replica's last heartbeat
//	             leaseDurationSeconds: how long the replica's sessions count without one
//
// The names are valid DNS-1123 names whatever the VM or replica is called;
// the vm label lets List find a VM's Leases, and the annotations say, in
// plain words, whose slot it is. The bridge writes a slot's Lease only
// after reading the VMI it reaches, so Leases are bounded by the VMs that
// exist; the Lease cannot be owned by the VMI, which lives in another
// namespace, so the janitor deletes the Leases of deleted VMs instead.
//
// # Who gets the slot
//
// decide is a pure function of the slot's Lease, what the deciding replica
// knows of its holder (holderState), the clock and the requesting user. A
// slot is vacant when its Lease does not exist, has an empty holder
// (released), or its holder is dead:
//
//   - a session Lease with an incarnation is kept by its replica's
//     heartbeat: it is dead when that heartbeat is missing, was not renewed
//     within its own leaseDurationSeconds (the replica crashed or lost the
//     API server), or is of another incarnation (the replica restarted, or
//     lapsed and started over). The deciding replica also counts dead its
//     own sessions of the current incarnation that have ended, though their
//     release may not have landed yet.
//   - a reservation, and a session Lease without an incarnation (written by
//     a bridge of the per-session layout, during a rolling upgrade), is
//     dead when its own renewTime (or acquireTime) plus
//     leaseDurationSeconds has passed.
//
// The holder's heartbeat comes from the watch's cache. When the cache makes
// a held slot look vacant, the Registry reads the heartbeat from the API
// server before it trusts that, since the cache may lag behind; a cache
// that lags the other way only keeps a dead replica's slots a little
// longer.
//
// Acquire takes a vacant slot and refuses an occupied one with a
// *HeldError naming the holder.
//
// TakeOver replaces whoever holds the slot with a reservation,
// holderIdentity "reserved/<user>" lasting ReservationTTL: that user's next
// Acquire gets the slot, everyone else's is refused. AcquireTakingOver
// replaces the holder with the caller's new session in one write. Either way
// the write records the displaced holder in taken-over-from, so the replica
// that held the slot tells its client TakenOver{By: user} rather than
// ErrExpired.
//
// Every write of a session Lease carries the resourceVersion it read; on a
// conflict the Registry reads again and decides again, so of N acquirers
// racing for one slot, on any number of replicas, exactly one wins.
//
// # Keeping and noticing loss
//
// Session Leases are written when a slot changes hands and never renewed.
// Each Registry renews its replica's heartbeat every RenewInterval, one
// write however many sessions it holds; so the API cost of holding
// sessions is one write per replica per RenewInterval, and a session costs
// no goroutine of its own. The heartbeat has a client of its own
// (Options.BackgroundClient, shared with the releases only), so that
// acquires queued behind the shared client's rate limit cannot delay it.
//
// A watch on the managed Leases in the namespace tells the Registry when a
// local session's Lease changed hands, so a take-over from another replica
// ends it within moments; a take-over on the same replica ends it at once.
// When the heartbeat cannot be renewed for a whole LeaseDuration, every
// local session is lost (ErrExpired), because by then other replicas count
// them vacant, and the Registry starts a new incarnation, so that no Lease
// written before counts as held when the API server is back.
//
// # Releasing
//
// Release ends the session at once and queues the write that clears the
// Lease's holder. A few workers write the queue through the background
// client, paced by its rate limiter, and retry a failed write with backoff
// until it lands, the Lease names someone else, or the Registry stops: a
// mass close of thousands of sessions releases every one of them, at the
// limiter's pace, without slowing the acquires of new sessions. Until a
// release lands, this replica counts the slot vacant already (the session
// is dead by the rule above), so a user who reconnects to it gets the slot
// at once; other replicas see it held until the write lands.
//
// When the Registry stops (the bridge shuts down), its queue stops too, and
// a session's Release writes its release itself, as far as its context
// allows; a replica that crashes releases nothing, and its slots come free
// when its heartbeat expires. Every RenewInterval the Registry also
// releases the Leases its cache shows naming this replica but none of its
// live sessions: left by an earlier incarnation, or by a claim whose answer
// was lost.
//
// # Deleting
//
// The Registry never deletes a Lease. Classify tells the bridge's janitor
// (package janitor) which ones may go: session Leases that are released,
// or untouched for longer than a grace, once their VM no longer exists,
// and heartbeats their replica stopped renewing longer than the grace ago.
//
// # Rolling upgrade from the per-session layout
//
// A bridge of this layout honours Leases of the old one (no incarnation)
// by their own renewal, as the old bridge did. The converse does not hold:
// an old bridge sees a session Lease of this layout as expired
// LeaseDuration after it was acquired, and may give that slot to another
// user; the session it displaces ends with "lease lost" (4003). So while
// old and new replicas run side by side, exclusivity holds only for
// sessions younger than the lease duration; the window ends with the
// rollout.
package session
