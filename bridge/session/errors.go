package session

import (
	"errors"
	"fmt"
	"time"
)

// Holder is who holds a session slot.
type Holder struct {
	// User is the holder's user name, as TokenReview gave it.
	User string
	// Since is when the holder got the slot.
	Since time.Time
	// Replica is the bridge replica serving the session; empty for a
	// reservation.
	Replica string
	// Reserved is true when a take-over reserved the slot for User, who
	// has not connected yet.
	Reserved bool
}

// ErrHeld is matched (errors.Is) by every *HeldError.
var ErrHeld = errors.New("session slot is held")

// HeldError refuses an Acquire because someone else holds the slot. The
// bridge answers it with 409 and the holder's name and since.
type HeldError struct {
	Key    Key
	Holder Holder
}

// Error implements error.
func (e *HeldError) Error() string {
	since := e.Holder.Since.UTC().Format(time.RFC3339)
	if e.Holder.Reserved {
		return fmt.Sprintf("%s is reserved for %s by a take-over since %s", e.Key, e.Holder.User, since)
	}
	return fmt.Sprintf("%s is held by %s since %s", e.Key, e.Holder.User, since)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// TakenOver is the LostReason of a session another user (or the same user,
// from elsewhere) took over. The client must not reconnect on its own.
type TakenOver struct {
	// By is the user who took the session over.
	By string
}

// Error implements error.
func (t TakenOver) Error() string { return "session taken over by " + t.By }

// ErrExpired is the LostReason of a session whose Lease could not be
// renewed in time, was deleted, was taken by another replica after it
// expired, or whose replica is stopping. The slot is no longer guarded.
var ErrExpired = errors.New("session lost: its lease expired")

// ErrReleased is the LostReason of a session its owner released.
var ErrReleased = errors.New("session released")
