package mutate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Bounds of the dry-run stash. A dry run writes no Secret, yet the object it
// answers with already points at <vm>-userdata; when the API server reinvokes
// the webhook for the same request (reinvocationPolicy IfNeeded, at most once,
// within the same request), the stash stands in for that Secret. An entry is
// needed for well under a second; everything here only bounds what a flood of
// dry runs can make the webhook hold.
const (
	// dryRunTTL bounds how long a dry run's Secrets are remembered: the
	// API server reinvokes a webhook within the same request, a few seconds
	// at most.
	dryRunTTL = 30 * time.Second
	// maxDryRunEntries bounds how many dry-run requests the stash holds
	// Secrets for. Typical entries are a few KiB (user-data just over
	// KubeVirt's 2048-byte inline limit), so the count, not the bytes,
	// bounds those.
	maxDryRunEntries = 256
	// maxDryRunBytes bounds the Secret data the stash holds (capacity of
	// the data slices, which is what stays in memory): eight dry runs at
	// the API server's 1 MiB limit on a Secret.
	maxDryRunBytes = 8 << 20
	// maxDryRunForgotten bounds the record of requests whose Secrets the
	// stash evicted or could not keep (a UID and Secret names each, about
	// 200 bytes), so that their reinvocation gets a clear answer.
	maxDryRunForgotten = 1024
)

// forgottenError: the reinvocation of a dry run needs a Secret the stash
// evicted or could not keep. Its message is for the user.
type forgottenError struct{ reason string }

func (e *forgottenError) Error() string { return e.reason }

// secretStash remembers the Secrets a dry-run admission would have written,
// per request UID, within maxDryRunEntries and maxDryRunBytes. To make room
// it drops expired entries first, then the oldest. It remembers (within
// maxDryRunForgotten) which Secrets it dropped before they expired, so that
// a reinvocation that needs one is refused with a reason (forgottenError)
// instead of reading the API server, where that Secret does not exist (or,
// on UPDATE, holds the stored VM's user-data, not this request's). Safe for
// concurrent use; the zero value is ready.
type secretStash struct {
	mu        sync.Mutex
	entries   map[types.UID]*stashEntry
	bytes     int
	forgotten map[types.UID]*forgottenEntry
	metrics   *DryRunMetrics
}

type stashKey struct{ namespace, name string }

type stashEntry struct {
	secrets map[stashKey]*corev1.Secret
	bytes   int
	added   time.Time
	expires time.Time
}

type forgottenEntry struct {
	names   map[stashKey]bool
	why     string
	added   time.Time
	expires time.Time
}

// Reasons an entry leaves the stash before its request is done with it, in
// messages and in the evictions metric.
const (
	dropExpired  = "expired"
	dropFull     = "full"
	dropTooLarge = "too_large"
)

// secretBytes is what a Secret's data keeps in memory.
func secretBytes(s *corev1.Secret) int {
	n := 0
	for k, v := range s.Data {
		n += len(k) + cap(v)
	}
	return n
}

// put remembers the Secrets of a dry-run request, replacing what the same
// request stashed before.
func (s *secretStash) put(uid types.UID, writes []SecretWrite, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[types.UID]*stashEntry{}
		s.forgotten = map[types.UID]*forgottenEntry{}
	}
	defer s.report()
	s.removeLocked(uid)
	for k, e := range s.entries {
		if now.After(e.expires) {
			s.removeLocked(k)
			s.metrics.evicted(dropExpired)
		}
	}
	for k, f := range s.forgotten {
		if now.After(f.expires) {
			delete(s.forgotten, k)
		}
	}
	if len(writes) == 0 {
		return
	}
	e := &stashEntry{secrets: map[stashKey]*corev1.Secret{}, added: now, expires: now.Add(dryRunTTL)}
	for _, w := range writes {
		e.secrets[stashKey{w.Secret.Namespace, w.Secret.Name}] = w.Secret
		e.bytes += secretBytes(w.Secret)
	}
	if e.bytes > maxDryRunBytes {
		s.forgetLocked(uid, e, dropTooLarge, now)
		s.metrics.evicted(dropTooLarge)
		return
	}
	for len(s.entries) >= maxDryRunEntries || s.bytes+e.bytes > maxDryRunBytes {
		oldest := s.oldestLocked()
		s.forgetLocked(oldest, s.entries[oldest], dropFull, now)
		s.removeLocked(oldest)
		s.metrics.evicted(dropFull)
	}
	s.entries[uid] = e
	s.bytes += e.bytes
}

// get returns the Secret a dry-run request stashed, nil when it stashed
// none, or a *forgottenError when the stash dropped it.
func (s *secretStash) get(uid types.UID, namespace, name string, now time.Time) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := stashKey{namespace, name}
	if e, ok := s.entries[uid]; ok && !now.After(e.expires) {
		if sec := e.secrets[key]; sec != nil {
			return sec, nil
		}
	}
	if f, ok := s.forgotten[uid]; ok && f.names[key] && !now.After(f.expires) {
		s.metrics.refused()
		return nil, &forgottenError{reason: forgottenReason(namespace, name, f.why)}
	}
	return nil, nil
}

// forgottenReason says, for the user, why a dry run's Secret is not there.
func forgottenReason(namespace, name, why string) string {
	if why == dropTooLarge {
		return fmt.Sprintf("this dry run's Secret %s/%s is larger than the %d MiB the webhook keeps for a dry run (a real apply would fail too: a Secret holds at most 1 MiB); make the user-data smaller",
			namespace, name, maxDryRunBytes>>20)
	}
	return fmt.Sprintf("this dry run's Secret %s/%s was not kept for the API server's second call to the webhook: the webhook keeps at most %d dry runs (%d MiB) at once and more were in flight; retry the dry run (a real apply is not affected)",
		namespace, name, maxDryRunEntries, maxDryRunBytes>>20)
}

func (s *secretStash) removeLocked(uid types.UID) {
	if e, ok := s.entries[uid]; ok {
		s.bytes -= e.bytes
		delete(s.entries, uid)
	}
}

// oldestLocked is the entry added first (ties: the smaller UID, so the
// choice does not depend on map order). The stash must not be empty.
func (s *secretStash) oldestLocked() types.UID {
	var oldest types.UID
	var at time.Time
	for uid, e := range s.entries {
		if oldest == "" || e.added.Before(at) || (e.added.Equal(at) && uid < oldest) {
			oldest, at = uid, e.added
		}
	}
	return oldest
}

// forgetLocked records that e's Secrets are gone before their time.
func (s *secretStash) forgetLocked(uid types.UID, e *stashEntry, why string, now time.Time) {
	for len(s.forgotten) >= maxDryRunForgotten {
		var oldest types.UID
		var at time.Time
		for k, f := range s.forgotten {
			if oldest == "" || f.added.Before(at) || (f.added.Equal(at) && k < oldest) {
				oldest, at = k, f.added
			}
		}
		delete(s.forgotten, oldest)
	}
	f := &forgottenEntry{names: map[stashKey]bool{}, why: why, added: now, expires: e.expires}
	for k := range e.secrets {
		f.names[k] = true
	}
	s.forgotten[uid] = f
}

// report sets the gauges; the caller holds mu.
func (s *secretStash) report() { s.metrics.set(len(s.entries), s.bytes) }

// stats returns the number of entries and their bytes.
func (s *secretStash) stats() (entries, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries), s.bytes
}

// stashedCluster reads a dry-run request's own Secrets from the stash first.
type stashedCluster struct {
	Cluster
	stash *secretStash
	uid   types.UID
}

// Secret implements Cluster.
func (c stashedCluster) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s, err := c.stash.get(c.uid, namespace, name, time.Now())
	if err != nil || s != nil {
		return s, err
	}
	return c.Cluster.Secret(ctx, namespace, name)
}

// dryRunRefusal answers a dry run whose reinvocation needed a Secret the
// stash dropped: 429 with the reason, nothing written. ok is false for any
// other error.
func dryRunRefusal(err error) (admission.Response, bool) {
	var fe *forgottenError
	if !errors.As(err, &fe) {
		return admission.Response{}, false
	}
	return admission.Errored(http.StatusTooManyRequests, errors.New("virtstation: "+fe.reason)), true
}

// WithDryRunMetrics makes the handler report its dry-run stash in m.
func WithDryRunMetrics(m *DryRunMetrics) HandlerOption {
	return func(h *Handler) { h.dryRun.metrics = m }
}
