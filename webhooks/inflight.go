package webhooks

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultMaxInFlight is how many admissions one webhook replica works on
// at once (--max-in-flight-admissions). An admission at the object size
// limit peaks at 7 to 19 MiB of heap (BenchmarkAdmissionPeakHeap,
// docs/benchmarks.md), so 16 of them need at most about 300 MiB on top of
// an idle webhook's 110 MB, inside the chart's 512 Mi; realistic VMs (a few
// hundred KiB at most) need a few MiB each. The work is CPU-bound apart
// from a few API calls, so on the 1 to 2 CPUs a replica gets, more at once
// adds memory, not throughput: the rest wait.
const DefaultMaxInFlight = 16

// admissionQueueWait is how long an admission waits for a slot before it
// is refused with 429: long enough to absorb a burst, short enough that the
// refusal reaches the API server well inside the webhooks' 5 s timeout
// (timeoutSeconds), leaving the admission that follows it its full time.
const admissionQueueWait = time.Second

// retryAfterSeconds is the Retry-After of a 429: by then a burst has
// usually drained.
const retryAfterSeconds = 1

// InFlight bounds the admissions a webhook server works on at once: a
// request waits up to its wait for a slot, then gets a 429 (for an
// AdmissionReview, a denial with code 429 that the API server shows). A
// waiting request costs no more than its connection: its body is not read
// until it has a slot. Safe for concurrent use.
type InFlight struct {
	slots    chan struct{}
	wait     time.Duration
	rejected prometheus.Counter
}

// NewInFlight returns a limit of n admissions at once (n < 1 means
// DefaultMaxInFlight), each waiting at most admissionQueueWait. With reg,
// the count of refused admissions is exported as
// virtstation_webhook_admissions_throttled_total.
func NewInFlight(n int, reg prometheus.Registerer) (*InFlight, error) {
	return newInFlight(n, admissionQueueWait, reg)
}

// newInFlight is NewInFlight with another wait, for tests.
func newInFlight(n int, wait time.Duration, reg prometheus.Registerer) (*InFlight, error) {
	if n < 1 {
		n = DefaultMaxInFlight
	}
	l := &InFlight{
		slots: make(chan struct{}, n), wait: wait,
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "virtstation_webhook_admissions_throttled_total",
			Help: "Admission requests refused with 429 because every admission slot (--max-in-flight-admissions) stayed busy for the queue wait.",
		}),
	}
	if reg != nil {
		if err := reg.Register(l.rejected); err != nil {
			return nil, fmt.Errorf("register admission limit metric: %w", err)
		}
	}
	return l, nil
}

// Wrap returns next behind the limit.
func (l *InFlight) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timer := time.NewTimer(l.wait)
		defer timer.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-timer.C:
			l.refuse(w, r)
			return
		case <-r.Context().Done():
			// The caller gave up; nothing to answer.
			return
		}
		defer func() { <-l.slots }()
		next.ServeHTTP(w, r)
	})
}

// refuse answers a request that found no slot in time.
func (l *InFlight) refuse(w http.ResponseWriter, r *http.Request) {
	l.rejected.Inc()
	msg := fmt.Sprintf("virtstation is busy: all %d admission slots of this webhook replica stayed in use for %s; "+
		"fix: retry (kubectl does not; the controllers that create VMs do), and if this persists, "+
		"raise --max-in-flight-admissions with the memory limit, or add webhook replicas", cap(l.slots), l.wait)
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	uid := ""
	if r.Method == http.MethodPost {
		uid = sniffUID(io.LimitReader(r.Body, uidPrefixBytes))
	}
	logf.Log.WithName("webhook-limit").Info("refused an admission: no slot free", "path", r.URL.Path, "uid", uid, "slots", cap(l.slots), "waited", l.wait)
	if uid == "" {
		http.Error(w, msg, http.StatusTooManyRequests)
		return
	}
	writeDenial(w, uid, http.StatusTooManyRequests, msg)
}

// limitedServer is a webhook server whose every handler is behind one
// InFlight.
type limitedServer struct {
	webhook.Server
	limit *InFlight
}

// Register registers hook behind the server's limit.
func (s limitedServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, s.limit.Wrap(hook))
}
