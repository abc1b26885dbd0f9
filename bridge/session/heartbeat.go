package session

import (
	"context"
	"crypto/rand"

	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// heartbeat renews the replica's heartbeat Lease every RenewInterval, and
// releases Leases that name this replica but no local session, until ctx
// ends. When no renewal lands for a whole LeaseDuration every local session
// is lost (ErrExpired), because by then other replicas count them vacant,
// and the next heartbeat starts a new incarnation, which no Lease written
// before names. When ctx ends every local session is lost and the
// Registry writes nothing more.
func (r *Registry) heartbeat(ctx context.Context) {
	defer r.stop()
	t := time.NewTicker(r.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Give up on this attempt when the lease would lapse, so the
		// sessions end no later than other replicas may take them.
		deadline := r.opts.Now().Add(r.opts.RenewInterval)
		r.mu.Lock()
		if r.beat != nil {
			deadline = minTime(deadline, r.beat.Spec.RenewTime.Add(r.opts.LeaseDuration))
		}
		r.mu.Unlock()
		attempt, cancel := context.WithDeadline(ctx, deadline)
		err := r.beatOnce(attempt)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.lapseIfStale(err)
		}
		r.sweep()
	}
}

// beatOnce writes the heartbeat in the current incarnation: renewTime now.
// Only Start, before the heartbeat loop runs, and the loop call it.
func (r *Registry) beatOnce(ctx context.Context) error {
	r.mu.Lock()
	inc, started := r.incarnation, r.started
	r.mu.Unlock()
	leases := r.backgroundLeases()
	name := heartbeatName(r.replica)
	cur := r.hbCur
	for range maxAttempts {
		if cur == nil {
			got, err := leases.Get(ctx, name, metav1.GetOptions{})
			switch {
			case err == nil:
				cur = got
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		now := r.opts.Now()
		if started.IsZero() {
			started = now
		}
		next := heartbeatLease(cur, r.namespace, r.replica, inc, started, now, r.opts.LeaseDuration)
		var written *coordinationv1.Lease
		var err error
		if cur == nil {
			written, err = leases.Create(ctx, next, metav1.CreateOptions{})
		} else {
			written, err = leases.Update(ctx, next, metav1.UpdateOptions{})
		}
		switch {
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err):
			cur = nil // changed or deleted under us: read it again
			continue
		case err != nil:
			return err
		}
		r.hbCur = written
		r.mu.Lock()
		if r.incarnation == inc {
			r.beat, r.started = written, started
		}
		r.mu.Unlock()
		return nil
	}
	return fmt.Errorf("heartbeat lease %s kept changing under %d attempts to write it", name, maxAttempts)
}

// lapseIfStale ends every local session and starts a new incarnation when
// the heartbeat has not been renewed for LeaseDuration; err is why the last
// renewal failed.
func (r *Registry) lapseIfStale(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.beat == nil || !expired(r.beat, r.opts.Now().Add(time.Millisecond)) {
		return
	}
	reason := fmt.Errorf("%w: could not renew the replica's heartbeat for %v: %w", ErrExpired, r.opts.LeaseDuration, err)
	for _, s := range r.sessions {
		r.endLocked(s, reason, true)
	}
	r.incarnation, r.started, r.beat = rand.Text(), time.Time{}, nil
}

// sweep queues the release of every Lease the watch's cache shows naming
// this replica but none of its sessions: left by an earlier incarnation, a
// claim whose answer was lost, or a release the Registry stopped before
// writing. They are vacant already; releasing them shows it to the other
// replicas and to people reading the Leases.
func (r *Registry) sweep() {
	var stale []releaseKey
	r.mu.Lock()
	r.lister.each(func(l *coordinationv1.Lease) {
		h, ok := parseHolder(holderIdentity(l))
		if !ok || h.Replica != r.replica {
			return
		}
		if _, live := r.issued[holderIdentity(l)]; !live {
			stale = append(stale, releaseKey{name: l.Name, holder: holderIdentity(l)})
		}
	})
	r.mu.Unlock()
	for _, k := range stale {
		r.releases.add(k)
	}
}

// stop ends every local session as the replica stops, and the Registry's
// workers. The Registry writes nothing more; a session's own Release still
// may.
func (r *Registry) stop() {
	r.mu.Lock()
	reason := fmt.Errorf("%w: the bridge replica is stopping", ErrExpired)
	for _, s := range r.sessions {
		r.endLocked(s, reason, false)
		s.stopped = true // Release still writes it, see there
	}
	r.beat = nil
	r.mu.Unlock()
	r.checks.ShutDown()
	r.releases.shutDown()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
