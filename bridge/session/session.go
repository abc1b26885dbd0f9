package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Session is one client's hold on a slot. The Registry renews it until it is
// released or lost; Lost is closed when either happens. Its methods are safe
// for concurrent use.
type Session struct {
	Key Key
	// ID is random and unique; with the replica it forms the Lease's
	// holder identity.
	ID string
	// User is the user the session was acquired for.
	User string
	// Since is when the session got the slot, as written in the Lease.
	Since time.Time

	holder   holderID
	registry *Registry
	wake     chan struct{} // the watch saw the Lease change hands

	mu      sync.Mutex            // serialises writes to the Lease
	lease   *coordinationv1.Lease // the Lease as last written or read, held by us
	renewed time.Time             // when we last renewed it

	endOnce sync.Once
	lost    chan struct{}
	reason  error // set before lost is closed
}

// newSession returns a session of r for user, not yet holding the slot.
func newSession(r *Registry, k Key, user string) *Session {
	id := rand.Text()
	return &Session{
		Key: k, ID: id, User: user,
		holder:   holderID{Replica: r.replica, Session: id},
		registry: r,
		wake:     make(chan struct{}, 1),
		lost:     make(chan struct{}),
	}
}

// Lost is closed when the session has lost its slot, or was released;
// LostReason says why.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// LostReason is nil while the session holds its slot; afterwards it is
// TakenOver, ErrExpired or ErrReleased.
func (s *Session) LostReason() error {
	select {
	case <-s.lost:
		return s.reason
	default:
		return nil
	}
}

// end closes Lost with reason, the first time.
func (s *Session) end(reason error) {
	s.endOnce.Do(func() {
		s.reason = reason
		close(s.lost)
	})
}

// Release ends the session (Lost closes with ErrReleased, unless it was lost
// already) and, if the Lease still names this session, clears its holder so
// the next client gets the slot at once rather than after the Lease
// duration.
func (s *Session) Release(ctx context.Context) error {
	s.registry.end(s, ErrReleased)
	s.mu.Lock()
	defer s.mu.Unlock()
	leases := s.registry.leases()
	l := s.lease
	for range maxAttempts {
		if holderIdentity(l) != s.holder.String() {
			return nil // not ours any more
		}
		_, err := leases.Update(ctx, releasedLease(l), metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("release %s: %w", s.Key, err)
		}
		if l, err = leases.Get(ctx, l.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("release %s: %w", s.Key, err)
		}
	}
	return fmt.Errorf("release %s: lease kept changing under %d attempts to write it", s.Key, maxAttempts)
}
