package session

import "strings"

// reservedReplica is the replica part of a reservation's holder identity
// ("reserved/<user>"); no replica may take this name.
const reservedReplica = "reserved"

// holderID is a parsed spec.holderIdentity: either a session
// ("<replica>/<session id>") or a reservation ("reserved/<user>").
type holderID struct {
	Replica, Session string
	// ReservedFor is the user a take-over reserved the slot for; Replica
	// and Session are empty then.
	ReservedFor string
}

// parseHolder parses a holder identity. It reports false for an empty or
// malformed one (no "/", or an empty part).
func parseHolder(s string) (holderID, bool) {
	replica, rest, ok := strings.Cut(s, "/")
	if !ok || replica == "" || rest == "" {
		return holderID{}, false
	}
	if replica == reservedReplica {
		return holderID{ReservedFor: rest}, true
	}
	return holderID{Replica: replica, Session: rest}, true
}

// String formats h as a holder identity; parseHolder(h.String()) == h.
func (h holderID) String() string {
	if h.ReservedFor != "" {
		return reservedReplica + "/" + h.ReservedFor
	}
	return h.Replica + "/" + h.Session
}
