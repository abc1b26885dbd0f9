package activity

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/virtstation/virtstation/api"
)

// Defaults of Options.
const (
	// DefaultMaxTracked bounds the VMs one replica throttles at once: far
	// more than the sessions a replica serves, at about 100 bytes each.
	DefaultMaxTracked = 10000
	// DefaultQueueSize bounds the writes waiting for a worker: a burst of
	// first keystrokes after a mass reconnect waits there, and anything
	// beyond is dropped until the next input.
	DefaultQueueSize = 1024
	// DefaultWorkers write the queue: a read and a write each, a few
	// milliseconds, so a handful keep up with thousands of VMs a minute.
	DefaultWorkers = 4
	// DefaultWriteTimeout bounds one write (read and write of the Lease).
	DefaultWriteTimeout = 10 * time.Second
	// keepRunningAttempts bounds the retries of a keep-running write that
	// raced another write of the Lease: the user asked for it, so it is
	// retried, a few times.
	keepRunningAttempts = 5
)

// Result is the outcome of one write, for the metrics.
type Result string

// The results.
const (
	// Written: the Recorder wrote the Lease.
	Written Result = "written"
	// SkippedRecent: another replica had written it within the interval.
	SkippedRecent Result = "skipped-recent"
	// Conflict: another replica wrote it between the read and the write.
	Conflict Result = "conflict"
	// Dropped: the queue was full, or the throttle tracked its maximum of
	// VMs; the next input tries again.
	Dropped Result = "dropped"
	// Error: the API server did not take the write.
	Error Result = "error"
)

// Options configure a Recorder; zero fields take the defaults.
type Options struct {
	// Interval is how often, at most, a VM's Lease is written
	// (api.ActivityInterval when zero).
	Interval     time.Duration
	MaxTracked   int
	QueueSize    int
	Workers      int
	WriteTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Count, when set, is called with every write's Result.
	Count func(Result)
	// Log gets write errors.
	Log logr.Logger
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = api.ActivityInterval
	}
	if o.MaxTracked <= 0 {
		o.MaxTracked = DefaultMaxTracked
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Count == nil {
		o.Count = func(Result) {}
	}
	return o
}

// Recorder writes the activity Leases of one bridge replica. It is safe
// for concurrent use; Input never blocks. Writes happen once Run runs.
type Recorder struct {
	leases    coordinationv1client.LeaseInterface
	namespace string
	opts      Options
	mu        sync.Mutex // guards th
	th        *throttle
	queue     chan pending
}

// pending is a write handed to the workers: input to vm at at.
type pending struct {
	vm     types.NamespacedName
	at     time.Time
	source string
}

// New returns a Recorder that writes Leases in namespace (the bridge's).
func New(leases coordinationv1client.LeasesGetter, namespace string, opts Options) *Recorder {
	opts = opts.withDefaults()
	return &Recorder{
		leases:    leases.Leases(namespace),
		namespace: namespace,
		opts:      opts,
		th:        newThrottle(opts.Interval, opts.MaxTracked),
		queue:     make(chan pending, opts.QueueSize),
	}
}

// Interval is how often, at most, the Recorder writes a VM's Lease.
func (r *Recorder) Interval() time.Duration { return r.opts.Interval }

// Run writes the queued input and forgets expired VMs until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.opts.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-r.queue:
					r.write(ctx, p)
				}
			}
		})
	}
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			r.mu.Lock()
			r.th.expire(r.opts.Now())
			r.mu.Unlock()
		}
	}
}

// For returns what a session's relay calls on every input message to VM
// namespace/name (relay.Options.Input); nil when r is nil. Calls within
// a sixtieth of the interval of the last one return at once, without
// taking the Recorder's lock: a session's keys and pointer motion cost
// an atomic load each. It is for one session; its calls may come from any
// goroutine.
func (r *Recorder) For(namespace, name, source string) func() {
	if r == nil {
		return nil
	}
	vm := types.NamespacedName{Namespace: namespace, Name: name}
	gate := r.opts.Interval / 60
	var next atomic.Int64
	return func() {
		now := r.opts.Now()
		if now.UnixNano() < next.Load() {
			return
		}
		next.Store(now.Add(gate).UnixNano())
		r.input(vm, source, now)
	}
}

// Input records input to VM namespace/name from source
// ("bridge vnc input") now. It never blocks.
func (r *Recorder) Input(namespace, name, source string) {
	r.input(types.NamespacedName{Namespace: namespace, Name: name}, source, r.opts.Now())
}

func (r *Recorder) input(vm types.NamespacedName, source string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, prev := r.th.admit(vm, now)
	switch a {
	case throttled:
		return
	case full:
		r.opts.Count(Dropped)
		return
	}
	select {
	case r.queue <- pending{vm: vm, at: now, source: source}:
	default:
		r.th.undo(vm, now, prev)
		r.opts.Count(Dropped)
	}
}

// write records p in its VM's Lease, unless another replica wrote the
// Lease within the interval of p or between the read and the write.
func (r *Recorder) write(ctx context.Context, p pending) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.WriteTimeout)
	defer cancel()
	res, err := r.writeLease(ctx, p)
	r.opts.Count(res)
	if err != nil && ctx.Err() == nil {
		r.opts.Log.Error(err, "record activity", "vm", p.vm.String())
	}
}

func (r *Recorder) writeLease(ctx context.Context, p pending) (Result, error) {
	name := api.ActivityLeaseName(p.vm.Namespace, p.vm.Name)
	cur, err := r.get(ctx, name)
	if err != nil {
		return Error, err
	}
	v, last := decide(cur, p.at, r.opts.Interval)
	switch v {
	case recent:
		r.mu.Lock()
		r.th.seen(p.vm, p.at, last)
		r.mu.Unlock()
		return SkippedRecent, nil
	case create:
		_, err = r.leases.Create(ctx, activityLease(nil, r.namespace, p.vm, p.at, p.source), metav1.CreateOptions{})
	default:
		_, err = r.leases.Update(ctx, activityLease(cur, r.namespace, p.vm, p.at, p.source), metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		return Written, nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return Conflict, nil
	default:
		return Error, fmt.Errorf("write Lease %s: %w", name, err)
	}
}

// get reads the Lease called name; nil when there is none.
func (r *Recorder) get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	l, err := r.leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read Lease %s: %w", name, err)
	}
	return l, nil
}

// KeepRunning records a keep-running lease user took on VM
// namespace/name for d from now, which is activity now too, and returns
// until when (to the second, as the annotation says). A request within an
// Interval of the last one that would extend its lease by less than the
// Interval writes nothing and returns the lease held. A write that races another is retried a few
// times.
func (r *Recorder) KeepRunning(ctx context.Context, namespace, name, user string, d time.Duration) (time.Time, error) {
	vm := types.NamespacedName{Namespace: namespace, Name: name}
	now := r.opts.Now()
	until := now.Add(d).UTC().Truncate(time.Second)
	leaseName := api.ActivityLeaseName(namespace, name)
	var err error
	for range keepRunningAttempts {
		var cur *coordinationv1.Lease
		if cur, err = r.get(ctx, leaseName); err != nil {
			break
		}
		if held, ok := heldUntil(cur, now, until, r.opts.Interval); ok {
			return held, nil
		}
		l := keepRunningLease(cur, r.namespace, vm, user, now, until)
		if cur == nil {
			_, err = r.leases.Create(ctx, l, metav1.CreateOptions{})
		} else {
			_, err = r.leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		r.opts.Count(Error)
		return time.Time{}, fmt.Errorf("record the keep-running lease of %s in Lease %s: %w", vm, leaseName, err)
	}
	r.opts.Count(Written)
	r.mu.Lock()
	r.th.wrote(vm, now)
	r.mu.Unlock()
	return until, nil
}
