package session

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// request is what a claim asks for.
type request int

const (
	acquire request = iota
	acquireTakingOver
	reserve
)

// claim reads k's Lease, decides, and writes it conditionally on what it
// read; when another writer got in between, it reads and decides again.
func (r *Registry) claim(ctx context.Context, k Key, user string, req request) (*Session, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if user == "" {
		return nil, fmt.Errorf("%s: user name is empty", k)
	}
	r.mu.Lock()
	runCtx, beating := r.runCtx, r.beat != nil
	r.mu.Unlock()
	switch {
	case runCtx == nil:
		return nil, errors.New("session registry not started")
	case runCtx.Err() != nil:
		return nil, errors.New("session registry stopped: the bridge replica is shutting down")
	case !beating:
		return nil, errors.New("session registry cannot reach the API server: its heartbeat lapsed")
	}
	name := leaseName(k)
	for range maxAttempts {
		cur, err := r.leases().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cur = nil
		case err != nil:
			return nil, fmt.Errorf("read lease for %s: %w", k, err)
		}
		v, err := r.decide(ctx, cur, user)
		if err != nil {
			return nil, fmt.Errorf("read the heartbeat of %s's holder: %w", k, err)
		}
		if v == occupied && req == acquire {
			return nil, &HeldError{Key: k, Holder: holderOf(cur)}
		}

		var s *Session
		var next *coordinationv1.Lease
		now := r.opts.Now()
		if req == reserve {
			next = claimLease(cur, r.namespace, k, holderID{ReservedFor: user}, "", user, now, r.opts.ReservationTTL, v)
		} else {
			s = newSession(r, k, user)
			inc, ok := r.issue(s)
			if !ok {
				return nil, errors.New("session registry cannot reach the API server: its heartbeat lapsed")
			}
			next = claimLease(cur, r.namespace, k, s.holder, inc, user, now, r.opts.LeaseDuration, v)
		}
		var written *coordinationv1.Lease
		if cur == nil {
			written, err = r.leases().Create(ctx, next, metav1.CreateOptions{})
		} else {
			written, err = r.leases().Update(ctx, next, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			r.unissue(s, false) // nothing written
			continue            // another writer won this round: read again
		}
		if err != nil {
			// The write may have landed all the same: release it, should
			// it name s.
			r.unissue(s, true)
			return nil, fmt.Errorf("write lease for %s: %w", k, err)
		}
		r.settle(name, cur, v, written, s)
		return s, nil
	}
	return nil, fmt.Errorf("%s: lease kept changing under %d attempts to write it; try again", k, maxAttempts)
}

// decide is decide for the slot Lease cur as this replica knows its holder.
// A holder's heartbeat comes from the watch's cache; when that makes a
// held slot look vacant, decide reads the heartbeat from the API server
// before trusting it, since the cache may lag.
func (r *Registry) decide(ctx context.Context, cur *coordinationv1.Lease, user string) (verdict, error) {
	hs, remote := r.holderState(cur)
	v := decide(cur, hs, r.opts.Now(), user)
	if v != vacant || !remote {
		return v, nil
	}
	h, _ := parseHolder(holderIdentity(cur))
	hb, err := r.leases().Get(ctx, heartbeatName(h.Replica), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return v, nil
	case err != nil:
		return v, err
	}
	return decide(cur, holderState{heartbeat: hb}, r.opts.Now(), user), nil
}

// holderState describes cur's holder as this replica knows it. remote is
// true when cur is a session Lease of the heartbeat layout held by another
// replica, whose heartbeat came from the cache.
func (r *Registry) holderState(cur *coordinationv1.Lease) (hs holderState, remote bool) {
	if cur == nil || !keptByHeartbeat(cur) {
		return hs, false
	}
	h, ok := parseHolder(holderIdentity(cur))
	if !ok || h.ReservedFor != "" {
		return hs, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.Replica == r.replica {
		// Our own heartbeat as we last wrote it: the cache may not have
		// caught up with a new incarnation.
		hs.heartbeat = r.beat
		_, live := r.issued[holderIdentity(cur)]
		hs.ended = cur.Annotations[annIncarnation] == r.incarnation && !live
		return hs, false
	}
	if r.lister.store != nil {
		hs.heartbeat = r.lister.get(heartbeatName(h.Replica))
	}
	return hs, true
}

// issue records s as a local session about to be written, and returns the
// incarnation its Lease must name. It reports false when the heartbeat has
// lapsed: no session can be kept then.
func (r *Registry) issue(s *Session) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.beat == nil {
		return "", false
	}
	r.issued[s.holder.String()] = struct{}{}
	s.incarnation = r.incarnation
	return r.incarnation, true
}

// unissue forgets s (nil: a reservation), whose claim failed; when its
// write may have landed, its Lease is released.
func (r *Registry) unissue(s *Session, mayHaveLanded bool) {
	if s == nil {
		return
	}
	r.mu.Lock()
	delete(r.issued, s.holder.String())
	r.mu.Unlock()
	if mayHaveLanded {
		r.releases.add(releaseKey{name: leaseName(s.Key), holder: s.holder.String()})
	}
}

// settle updates the local sessions after a successful claim of the Lease
// named name: a local session displaced by it is lost at once, and the new
// session s (nil for a reservation) is kept by the heartbeat from now on.
func (r *Registry) settle(name string, prev *coordinationv1.Lease, v verdict, written *coordinationv1.Lease, s *Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.sessions[name]; old != nil {
		reason := ErrExpired // old's hold had lapsed unnoticed
		if v == occupied && holderIdentity(prev) == old.holder.String() {
			reason = lostReason(written, old.holder.String())
		}
		r.endLocked(old, reason, false)
	}
	if s == nil {
		return
	}
	if prev != nil {
		s.prevRV = prev.ResourceVersion
	}
	if written.Spec.AcquireTime != nil {
		s.Since = written.Spec.AcquireTime.Time
	}
	r.sessions[name] = s
	if s.incarnation != r.incarnation {
		// The heartbeat lapsed while s was being written: nothing keeps it.
		r.endLocked(s, fmt.Errorf("%w: the replica lost the API server while acquiring it", ErrExpired), true)
		return
	}
	// The watch may have seen a change of this Lease before s was
	// registered to hear of it: compare with what the cache holds now.
	if r.lister.store != nil {
		if l := r.lister.get(name); l != nil {
			r.compareLocked(s, l, false)
		}
	}
}
