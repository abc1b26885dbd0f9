package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/workqueue"
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
	// LeaseDuration is how long a replica's sessions stay held without a
	// heartbeat; whole seconds. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewInterval is how often the replica renews its heartbeat Lease.
	// Default LeaseDuration/3.
	RenewInterval time.Duration
	// ReservationTTL is how long a take-over reserves the slot; whole
	// seconds. Default DefaultReservationTTL.
	ReservationTTL time.Duration
	// BackgroundClient, when set, writes the heartbeat and the queued
	// releases instead of the Registry's client: work no user waits for.
	// Give it a rate limiter of its own, so that neither competes with
	// acquires for the other's limiter: a burst of acquires cannot delay
	// the one write that keeps every session of the replica past the
	// lease duration, and a mass release drains at this limiter's pace
	// without slowing new sessions. The Registry has at most
	// releaseWorkers releases outstanding on it, so the heartbeat never
	// waits behind more than those.
	BackgroundClient kubernetes.Interface
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
// However many sessions it holds, a started Registry writes one heartbeat
// per RenewInterval, and otherwise one or two requests per acquire,
// take-over and release. It runs a fixed set of goroutines: the heartbeat
// loop, the watch's informer, a checker and the release workers.
//
// Its client needs get, list, watch, create and update on
// coordination.k8s.io leases in the namespace.
type Registry struct {
	client    kubernetes.Interface
	namespace string
	replica   string
	opts      Options

	lister   leaseLister           // the watch's cache; zero before Start
	hbCur    *coordinationv1.Lease // the heartbeat as last written; the heartbeat loop's own
	checks   workqueue.TypedRateLimitingInterface[string]
	releases *releaseQueue

	mu          sync.Mutex
	runCtx      context.Context       // from Start; nil before
	incarnation string                // of the heartbeat; a lapse starts a new one
	started     time.Time             // when incarnation's first heartbeat was written; zero before
	beat        *coordinationv1.Lease // the heartbeat as last written, in incarnation; nil while none is
	issued      map[string]struct{}   // holder identities of the local sessions, from before their claim is written until they end
	sessions    map[string]*Session   // by Lease name: the slots this replica holds
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
	if opts.BackgroundClient == nil {
		opts.BackgroundClient = client
	}
	return &Registry{
		client: client, namespace: namespace, replica: replica, opts: opts,
		incarnation: rand.Text(),
		issued:      map[string]struct{}{},
		sessions:    map[string]*Session{},
	}, nil
}

// Start writes the replica's heartbeat, watches the managed Leases and
// returns once the watch is running. Then the heartbeat keeps the
// sessions acquired afterwards until they are released or lost, or until
// ctx ends: then every local session is lost (ErrExpired) and the
// Registry writes nothing more; the slots are free once their sessions'
// Release has written them (see there) or the heartbeat has expired.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	started := r.runCtx != nil
	r.mu.Unlock()
	if started {
		return errors.New("session registry already started")
	}
	r.checks = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](releaseRetryBase, releaseRetryMax))
	r.releases = newReleaseQueue()
	fail := func(err error) error {
		r.checks.ShutDown()
		r.releases.shutDown()
		return err
	}
	if err := r.beatOnce(ctx); err != nil {
		return fail(fmt.Errorf("write the replica's heartbeat lease: %w", err))
	}
	lister, err := r.watch(ctx)
	if err != nil {
		return fail(err)
	}
	r.mu.Lock()
	r.lister = lister
	r.runCtx = ctx
	r.mu.Unlock()
	go r.heartbeat(ctx)
	go r.checkLoop(ctx)
	for range releaseWorkers {
		go r.releaseLoop(ctx)
	}
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

// endLocked ends s with reason, unless it has ended already; when release
// is true, s's Lease is released. r.mu is held.
func (r *Registry) endLocked(s *Session, reason error, release bool) {
	name := leaseName(s.Key)
	if r.sessions[name] == s {
		delete(r.sessions, name)
	}
	if _, live := r.issued[s.holder.String()]; !live {
		return // ended already, or never written
	}
	delete(r.issued, s.holder.String())
	s.end(reason)
	if release {
		s.releasing = r.releases.add(releaseKey{name: name, holder: s.holder.String()})
	}
}

// leases is the Lease client for the bridge's namespace.
func (r *Registry) leases() coordinationv1client.LeaseInterface {
	return r.client.CoordinationV1().Leases(r.namespace)
}

// backgroundLeases is the Lease client of the heartbeat and the releases.
func (r *Registry) backgroundLeases() coordinationv1client.LeaseInterface {
	return r.opts.BackgroundClient.CoordinationV1().Leases(r.namespace)
}
