package session

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// verdict is what a request for a slot makes of the slot's Lease.
type verdict int

const (
	// vacant: no Lease, or it is released or expired. The requester takes it.
	vacant verdict = iota + 1
	// reservedForRequester: a live take-over reservation for the requester.
	// The requester takes it.
	reservedForRequester
	// occupied: a live session holds it, or a live reservation for someone
	// else. Acquire is refused; a take-over displaces the holder.
	occupied
)

// String names v in test failures.
func (v verdict) String() string {
	switch v {
	case vacant:
		return "vacant"
	case reservedForRequester:
		return "reserved for requester"
	case occupied:
		return "occupied"
	}
	return "unknown verdict"
}

// holderState is what decide needs to know about a slot's holder besides
// the slot's own Lease.
type holderState struct {
	// heartbeat is the heartbeat Lease of the replica the slot's holder
	// identity names; nil when that replica has none (or it is unknown).
	heartbeat *coordinationv1.Lease
	// ended is true when the holder is a session of the deciding replica's
	// current incarnation that has ended there: its release may still be on
	// its way to the API server, but nobody uses the slot.
	ended bool
}

// decide says whether user may take the slot whose Lease is l (nil when it
// does not exist) at now; hs describes l's holder.
func decide(l *coordinationv1.Lease, hs holderState, now time.Time, user string) verdict {
	if !held(l, hs, now) {
		return vacant
	}
	if h, ok := parseHolder(holderIdentity(l)); ok && h.ReservedFor == user {
		return reservedForRequester
	}
	return occupied
}

// held reports whether l (nil: no Lease) names a live holder. A session of
// the heartbeat layout lives while its replica's heartbeat of the same
// incarnation is fresh, unless it ended on the deciding replica; a
// reservation, a malformed holder and a session of the per-session layout
// live while their own Lease is.
func held(l *coordinationv1.Lease, hs holderState, now time.Time) bool {
	if l == nil || holderIdentity(l) == "" {
		return false
	}
	h, ok := parseHolder(holderIdentity(l))
	if !ok || h.ReservedFor != "" || !keptByHeartbeat(l) {
		return !expired(l, now)
	}
	return !hs.ended && replicaAlive(hs.heartbeat, h.Replica, l.Annotations[annIncarnation], now)
}

// keptByHeartbeat reports whether l, a session Lease, is of the heartbeat
// layout: kept by its replica's heartbeat, not renewed itself.
func keptByHeartbeat(l *coordinationv1.Lease) bool {
	return l.Annotations[annIncarnation] != ""
}

// replicaAlive reports whether hb is replica's heartbeat in incarnation
// and was renewed in time.
func replicaAlive(hb *coordinationv1.Lease, replica, incarnation string, now time.Time) bool {
	return hb != nil && holderIdentity(hb) == replica &&
		hb.Annotations[annIncarnation] == incarnation && !expired(hb, now)
}

// expired reports whether l's holder failed to renew it in time (l being a
// heartbeat, a reservation or a Lease of the per-session layout):
// renewTime (or acquireTime) + leaseDurationSeconds < now. A Lease without
// a duration or a time cannot be held.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	last := l.Spec.RenewTime
	if last == nil {
		last = l.Spec.AcquireTime
	}
	if last == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	return last.Add(d).Before(now)
}

// holderOf describes l's holder, for a HeldError or a Status.
func holderOf(l *coordinationv1.Lease) Holder {
	h := Holder{User: l.Annotations[annUser]}
	if l.Spec.AcquireTime != nil {
		h.Since = l.Spec.AcquireTime.Time
	}
	id, _ := parseHolder(holderIdentity(l))
	h.Replica = id.Replica
	if id.ReservedFor != "" {
		h.User, h.Reserved = id.ReservedFor, true
	}
	return h
}

// lostReason says why the session with holder identity self lost its slot,
// given the slot's Lease as it is now (nil: deleted) and no longer held by
// self: a take-over that displaced self names the user who took it;
// anything else means self's hold had lapsed.
func lostReason(l *coordinationv1.Lease, self string) error {
	if l != nil && l.Annotations[annTakenOverFrom] == self {
		by := l.Annotations[annUser]
		if h, ok := parseHolder(holderIdentity(l)); ok && h.ReservedFor != "" {
			by = h.ReservedFor
		}
		return TakenOver{By: by}
	}
	return ErrExpired
}

// holderIdentity is l's spec.holderIdentity, "" when unset.
func holderIdentity(l *coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "")
}
