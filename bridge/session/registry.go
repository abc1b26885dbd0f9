package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Defaults for Options.
const (
	// DefaultLeaseDuration is how long a slot stays held without renewal:
	// the longest a crashed replica keeps its slots.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultReservationTTL is how long a take-over keeps the slot for the
	// user who asked: time enough for their client to dial.
	DefaultReservationTTL = 30 * time.Second
)

// maxAttempts bounds the read-decide-write rounds of one request; each lost
// round means another writer won, so a few rounds always settle.
const maxAttempts = 10

// Options tune a Registry; zero fields take the defaults.
type Options struct {
	// LeaseDuration is how long a slot counts as held without renewal;
	// whole seconds. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewInterval is how often each local session renews its Lease.
	// Default LeaseDuration/3.
	RenewInterval time.Duration
	// ReservationTTL is how long a take-over reserves the slot; whole
	// seconds. Default DefaultReservationTTL.
	ReservationTTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// withDefaults fills in o's zero fields and checks the durations.
func (o Options) withDefaults() (Options, error) {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	if o.ReservationTTL == 0 {
		o.ReservationTTL = DefaultReservationTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for name, d := range map[string]time.Duration{"lease duration": o.LeaseDuration, "reservation TTL": o.ReservationTTL} {
		if d < time.Second || d%time.Second != 0 {
			return o, fmt.Errorf("%s %v: must be whole seconds, at least 1s (Leases count in seconds)", name, d)
		}
	}
	if o.RenewInterval <= 0 || o.RenewInterval >= o.LeaseDuration {
		return o, fmt.Errorf("renew interval %v: must be positive and shorter than the lease duration %v", o.RenewInterval, o.LeaseDuration)
	}
	return o, nil
}

// Registry hands out session slots backed by Leases. One Registry runs per
// bridge replica; all replicas of a bridge share the namespace. Its methods
// are safe for concurrent use. Start it before acquiring.
//
// Its client needs get, list, watch, create and update on
// coordination.k8s.io leases in the namespace, and a rate limit with room
// for one renewal per session every RenewInterval: a renewal stuck behind
// client-go's default 5 requests per second can miss its Lease's expiry.
type Registry struct {
	client    kubernetes.Interface
	namespace string
	replica   string
	opts      Options

	mu       sync.Mutex
	runCtx   context.Context     // from Start; nil before
	sessions map[string]*Session // by Lease name: the slots this replica holds
}

// New returns a Registry for the bridge replica named replica (its pod name,
// say), keeping Leases in namespace.
func New(client kubernetes.Interface, namespace, replica string, opts Options) (*Registry, error) {
	if replica == "" || strings.Contains(replica, "/") || replica == reservedReplica {
		return nil, fmt.Errorf("replica name %q: must be non-empty, without %q, and not %q", replica, "/", reservedReplica)
	}
	if namespace == "" {
		return nil, errors.New("namespace for session leases is empty")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Registry{client: client, namespace: namespace, replica: replica, opts: opts, sessions: map[string]*Session{}}, nil
}

// Start watches the session Leases and returns once the watch is running.
// Sessions acquired afterwards are renewed until they are released or lost,
// or until ctx ends: then every local session is lost (ErrExpired) and
// nothing more is written, so other replicas get the slots once the Leases
// expire.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	started := r.runCtx != nil
	r.mu.Unlock()
	if started {
		return errors.New("session registry already started")
	}
	if err := r.watch(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.runCtx = ctx
	r.mu.Unlock()
	return nil
}

// Acquire gives user a session in k's slot, when it is vacant or reserved
// for user by a take-over. When someone else holds it, the error is a
// *HeldError. Release the session when its client goes, including when the
// connection fails to start, or the slot stays held until the Registry
// stops.
func (r *Registry) Acquire(ctx context.Context, k Key, user string) (*Session, error) {
	return r.claim(ctx, k, user, acquire)
}

// AcquireTakingOver gives user a session in k's slot whoever holds it, in
// one write. The displaced session, on whatever replica, is lost with
// TakenOver{By: user}.
func (r *Registry) AcquireTakingOver(ctx context.Context, k Key, user string) (*Session, error) {
	return r.claim(ctx, k, user, acquireTakingOver)
}

// TakeOver reserves k's slot for user for ReservationTTL, whoever holds it:
// user's next Acquire gets it, anyone else's is refused. The displaced
// session, on whatever replica, is lost with TakenOver{By: user}.
func (r *Registry) TakeOver(ctx context.Context, k Key, user string) error {
	_, err := r.claim(ctx, k, user, reserve)
	return err
}

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
	runCtx := r.runCtx
	r.mu.Unlock()
	if runCtx == nil {
		return nil, errors.New("session registry not started")
	}
	if runCtx.Err() != nil {
		return nil, errors.New("session registry stopped: the bridge replica is shutting down")
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
		now := r.opts.Now()
		v := decide(cur, now, user)
		if v == occupied && req == acquire {
			return nil, &HeldError{Key: k, Holder: holderOf(cur)}
		}

		var s *Session
		var next *coordinationv1.Lease
		if req == reserve {
			next = claimLease(cur, r.namespace, k, holderID{ReservedFor: user}, user, now, r.opts.ReservationTTL, v)
		} else {
			s = newSession(r, k, user)
			next = claimLease(cur, r.namespace, k, s.holder, user, now, r.opts.LeaseDuration, v)
		}
		var written *coordinationv1.Lease
		if cur == nil {
			written, err = r.leases().Create(ctx, next, metav1.CreateOptions{})
		} else {
			written, err = r.leases().Update(ctx, next, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another writer won this round: read again
		}
		if err != nil {
			return nil, fmt.Errorf("write lease for %s: %w", k, err)
		}
		r.settle(runCtx, name, cur, v, written, s)
		return s, nil
	}
	return nil, fmt.Errorf("%s: lease kept changing under %d attempts to write it; try again", k, maxAttempts)
}

// settle updates the local sessions after a successful claim of the Lease
// named name: a local session displaced by it is lost at once, and the new
// session s (nil for a reservation) starts renewing.
func (r *Registry) settle(runCtx context.Context, name string, prev *coordinationv1.Lease, v verdict, written *coordinationv1.Lease, s *Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.sessions[name]; old != nil {
		reason := ErrExpired // old's hold had lapsed unnoticed
		if v == occupied && holderIdentity(prev) == old.holder.String() {
			reason = lostReason(written, old.holder.String())
		}
		r.endLocked(old, reason)
	}
	if s == nil {
		return
	}
	s.lease, s.renewed = written, r.opts.Now()
	if written.Spec.AcquireTime != nil {
		s.Since = written.Spec.AcquireTime.Time
	}
	r.sessions[name] = s
	go r.keep(runCtx, s)
}

// end ends s with reason, unless it has ended already.
func (r *Registry) end(s *Session, reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endLocked(s, reason)
}

// endLocked is end with r.mu held.
func (r *Registry) endLocked(s *Session, reason error) {
	name := leaseName(s.Key)
	if r.sessions[name] == s {
		delete(r.sessions, name)
	}
	s.end(reason)
}

// leases is the Lease client for the bridge's namespace.
func (r *Registry) leases() coordinationv1client.LeaseInterface {
	return r.client.CoordinationV1().Leases(r.namespace)
}
