package session

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keep renews s every RenewInterval and checks its Lease when the watch
// wakes it, until s ends or ctx does. When ctx ends, s is lost: nothing
// renews it any more.
func (r *Registry) keep(ctx context.Context, s *Session) {
	t := time.NewTicker(r.opts.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-s.lost:
			return
		case <-ctx.Done():
			r.end(s, fmt.Errorf("%w: the bridge replica is stopping", ErrExpired))
			return
		case <-t.C:
			r.renew(ctx, s)
		case <-s.wake:
			r.check(ctx, s)
		}
	}
}

// renew writes a fresh renewTime into s's Lease. When the Lease changed
// since s last saw it, renew checks whether it is still s's and, if so,
// renews again. When renewals keep failing for a whole LeaseDuration, s is
// lost: other replicas may take the slot by now.
func (r *Registry) renew(ctx context.Context, s *Session) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.RenewInterval)
	defer cancel()
	for range 2 {
		s.mu.Lock()
		now := r.opts.Now()
		written, err := r.leases().Update(ctx, renewedLease(s.lease, now), metav1.UpdateOptions{})
		if err == nil {
			s.lease, s.renewed = written, now
		}
		renewed := s.renewed
		s.mu.Unlock()
		switch {
		case err == nil:
			return
		case apierrors.IsConflict(err):
			if !r.check(ctx, s) {
				return
			}
		default:
			if now.Sub(renewed) >= r.opts.LeaseDuration {
				r.end(s, fmt.Errorf("%w: could not renew it for %v: %w", ErrExpired, r.opts.LeaseDuration, err))
			}
			return
		}
	}
}

// check reads s's Lease and ends s when it is no longer s's. It reports
// whether s still holds the slot (true also when the read fails: renew
// decides when that has gone on too long).
func (r *Registry) check(ctx context.Context, s *Session) bool {
	l, err := r.leases().Get(ctx, leaseName(s.Key), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.end(s, fmt.Errorf("%w: its lease was deleted", ErrExpired))
		return false
	case err != nil:
		return true
	case holderIdentity(l) != s.holder.String():
		r.end(s, lostReason(l, s.holder.String()))
		return false
	}
	s.mu.Lock()
	s.lease = l
	s.mu.Unlock()
	return true
}
