package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// Session is one client's hold on a slot. The Registry's heartbeat keeps it
// until it is released or lost; Lost is closed when either happens. Its
// methods are safe for concurrent use.
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

	// Guarded by registry.mu.
	incarnation string          // of the heartbeat that keeps it
	prevRV      string          // resourceVersion of the Lease the claim replaced; "" when it created it
	seen        bool            // the watch delivered the claim's write (or a later one naming us)
	stopped     bool            // ended as the Registry stopped, not released
	releasing   <-chan struct{} // closed when the queued release is done; nil when none was queued

	// ctx is done once the session has lost its slot or was released, with
	// the reason as its cause; cancel ends it. A context rather than a bare
	// channel, so a relay can wait for it with context.AfterFunc instead of
	// a goroutine.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// newSession returns a session of r for user, not yet holding the slot.
func newSession(r *Registry, k Key, user string) *Session {
	id := rand.Text()
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Session{
		Key: k, ID: id, User: user,
		holder:   holderID{Replica: r.replica, Session: id},
		registry: r,
		ctx:      ctx,
		cancel:   cancel,
	}
}

// Lost is closed when the session has lost its slot, or was released;
// LostReason says why.
func (s *Session) Lost() <-chan struct{} { return s.ctx.Done() }

// Context is done when Lost is closed, with LostReason as its
// context.Cause: wait for the loss with context.AfterFunc, which parks no
// goroutine.
func (s *Session) Context() context.Context { return s.ctx }

// LostReason is nil while the session holds its slot; afterwards it is
// TakenOver, ErrExpired or ErrReleased.
func (s *Session) LostReason() error { return context.Cause(s.ctx) }

// end closes Lost with reason, which must not be nil. The Registry calls it
// once, with its mutex held.
func (s *Session) end(reason error) { s.cancel(reason) }

// Release ends the session (Lost closes with ErrReleased, unless it was lost
// already) and queues the write that clears its holder from the Lease, so
// the next client gets the slot at once rather than after the lease
// duration. Until that write lands this replica counts the slot vacant
// already; other replicas see it held.
//
// Release waits for the write until ctx ends, but the write does not
// depend on ctx: the Registry retries it, paced by its client's rate
// limit, until it lands or the Lease no longer names the session. So
// Release returns nil even when ctx ends first. When the Registry has
// stopped (the bridge is shutting down), Release writes the release
// itself, within ctx, as the queue no longer runs; then it returns the
// write's error.
func (s *Session) Release(ctx context.Context) error {
	r := s.registry
	r.mu.Lock()
	r.endLocked(s, ErrReleased, true)
	done, runCtx, stopped := s.releasing, r.runCtx, s.stopped
	r.mu.Unlock()
	if done == nil && !stopped {
		return nil // lost to another holder: nothing to release
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return nil
	case <-runCtx.Done():
	}
	if err := r.release(ctx, releaseKey{name: leaseName(s.Key), holder: s.holder.String()}); err != nil {
		return fmt.Errorf("release %s as the bridge stops: %w", s.Key, err)
	}
	return nil
}
