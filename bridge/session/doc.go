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
//	             virtstation.io/taken-over-from: <holder identity a take-over displaced>
//	spec:        holderIdentity:       <replica>/<session id>, or reserved/<user>, or empty
//	             acquireTime:          when the holder got the slot ("since")
//	             renewTime:            the holder's last renewal
//	             leaseDurationSeconds: how long the slot counts without renewal
//	             leaseTransitions:     how often the holder changed
//
// The name is a valid DNS-1123 name whatever the VM is called; the vm label
// lets List find a VM's Leases, and the annotations say, in plain words,
// whose slot it is.
//
// # Who gets the slot
//
// decide is a pure function of the Lease, the clock and the requesting user.
// A slot is vacant when its Lease does not exist, has an empty holder
// (released), or was not renewed within leaseDurationSeconds (expired: the
// holding replica crashed or lost the API server). Acquire takes a vacant
// slot and refuses an occupied one with a *HeldError naming the holder.
//
// TakeOver replaces whoever holds the slot with a reservation,
// holderIdentity "reserved/<user>" lasting ReservationTTL: that user's next
// Acquire gets the slot, everyone else's is refused. AcquireTakingOver
// replaces the holder with the caller's new session in one write. Either way
// the write records the displaced holder in taken-over-from, so the replica
// that held the slot tells its client TakenOver{By: user} rather than
// ErrExpired.
//
// Every write carries the resourceVersion it read; on a conflict the
// Registry reads again and decides again, so of N acquirers racing for one
// slot, on any number of replicas, exactly one wins.
//
// # Noticing loss
//
// Each local session renews its Lease every RenewInterval. A watch on the
// managed Leases in the namespace wakes a session whose Lease changed hands,
// so a take-over from another replica ends it within moments; a take-over
// on the same replica ends it at once. A session that cannot renew for a
// whole LeaseDuration counts as lost (ErrExpired), because by then another
// replica may have taken its slot.
package session
