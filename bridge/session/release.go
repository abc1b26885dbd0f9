package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
)

// Release queue tuning.
const (
	// releaseWorkers write releases at once. The background client's rate
	// limiter paces them; a few workers keep its tokens used while one
	// waits for an answer, and bound what the heartbeat can wait behind.
	releaseWorkers = 4
	// releaseAttemptTimeout bounds one release write, including its wait
	// for the client's rate limiter; a failed attempt is retried.
	releaseAttemptTimeout = 30 * time.Second
	// releaseRetryBase and releaseRetryMax space the retries of a failing
	// release: doubling from the base, never more than the max apart. No
	// overall cap: a release is retried until it lands, the Lease no
	// longer names the session, or the Registry stops.
	releaseRetryBase = 100 * time.Millisecond
	releaseRetryMax  = 10 * time.Second
)

// releaseKey names a release: clear holder from the Lease called name.
type releaseKey struct{ name, holder string }

// releaseQueue holds the releases not written yet. Each key is written by
// one worker at a time; done channels tell Release when it landed.
type releaseQueue struct {
	queue workqueue.TypedRateLimitingInterface[releaseKey]

	mu   sync.Mutex
	done map[releaseKey]chan struct{} // closed when the key's release is done
}

func newReleaseQueue() *releaseQueue {
	return &releaseQueue{
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[releaseKey](releaseRetryBase, releaseRetryMax)),
		done: map[releaseKey]chan struct{}{},
	}
}

// add queues k, unless it is queued already, and returns a channel closed
// once k's release is done.
func (q *releaseQueue) add(k releaseKey) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ch, ok := q.done[k]; ok {
		return ch
	}
	ch := make(chan struct{})
	q.done[k] = ch
	q.queue.Add(k)
	return ch
}

// finish marks k's release done.
func (q *releaseQueue) finish(k releaseKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ch, ok := q.done[k]; ok {
		close(ch)
		delete(q.done, k)
	}
	q.queue.Forget(k)
}

func (q *releaseQueue) shutDown() { q.queue.ShutDown() }

// releaseLoop writes queued releases until the queue shuts down.
func (r *Registry) releaseLoop(ctx context.Context) {
	for {
		k, shutdown := r.releases.queue.Get()
		if shutdown {
			return
		}
		attempt, cancel := context.WithTimeout(ctx, releaseAttemptTimeout)
		err := r.release(attempt, k)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.releases.queue.AddRateLimited(k)
		} else {
			r.releases.finish(k)
		}
		r.releases.queue.Done(k)
	}
}

// release clears k.holder from the Lease k.name, if the Lease still names
// it. It starts from the watch's copy of the Lease when that names the
// holder (usually: the session was written long ago), else reads it.
func (r *Registry) release(ctx context.Context, k releaseKey) error {
	var l *coordinationv1.Lease
	if c := r.lister.get(k.name); c != nil && holderIdentity(c) == k.holder {
		l = c
	} else {
		got, err := r.backgroundLeases().Get(ctx, k.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("release lease %s: %w", k.name, err)
		}
		l = got
	}
	for range maxAttempts {
		if holderIdentity(l) != k.holder {
			return nil // not ours any more
		}
		_, err := r.backgroundLeases().Update(ctx, releasedLease(l), metav1.UpdateOptions{})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("release lease %s: %w", k.name, err)
		}
		var gerr error
		l, gerr = r.backgroundLeases().Get(ctx, k.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return nil
		case gerr != nil:
			return fmt.Errorf("release lease %s: %w", k.name, gerr)
		}
	}
	return fmt.Errorf("release lease %s: it kept changing under %d attempts to write it", k.name, maxAttempts)
}
