package mutate

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// DryRunMetrics are the dry-run stash's Prometheus metrics:
//
//	virtstation_dryrun_stash_entries                dry-run requests whose Secrets are held
//	virtstation_dryrun_stash_bytes                  Secret data held for them
//	virtstation_dryrun_stash_evictions_total{reason} entries dropped: expired, full, too_large
//	virtstation_dryrun_stash_refusals_total         reinvocations answered 429 because their entry was dropped
//
// The gauges are as of the last dry run. A nil *DryRunMetrics records
// nothing. Its methods are safe for concurrent use.
type DryRunMetrics struct {
	entries   prometheus.Gauge
	bytes     prometheus.Gauge
	evictions *prometheus.CounterVec
	refusals  prometheus.Counter
}

// NewDryRunMetrics creates the metrics and registers them with reg.
// Collectors reg already has (from an earlier call) are reused.
func NewDryRunMetrics(reg prometheus.Registerer) (*DryRunMetrics, error) {
	m := &DryRunMetrics{
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "virtstation_dryrun_stash_entries",
			Help: "Dry-run admissions whose would-be Secrets the mutating webhook holds for the API server's reinvocation.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "virtstation_dryrun_stash_bytes",
			Help: "Bytes of Secret data the mutating webhook holds for dry-run admissions.",
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_dryrun_stash_evictions_total",
			Help: "Dry-run stash entries dropped, by reason: expired, full (oldest evicted to make room), too_large (never kept).",
		}, []string{"reason"}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "virtstation_dryrun_stash_refusals_total",
			Help: "Dry-run reinvocations answered 429 because the Secret they needed had been dropped from the stash.",
		}),
	}
	var err error
	if m.entries, err = registerOrReuse(reg, m.entries); err != nil {
		return nil, err
	}
	if m.bytes, err = registerOrReuse(reg, m.bytes); err != nil {
		return nil, err
	}
	if m.evictions, err = registerOrReuse(reg, m.evictions); err != nil {
		return nil, err
	}
	if m.refusals, err = registerOrReuse(reg, m.refusals); err != nil {
		return nil, err
	}
	return m, nil
}

// registerOrReuse registers c, or returns the equal collector reg already has.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

var defaultDryRunMetrics = sync.OnceValues(func() (*DryRunMetrics, error) { return NewDryRunMetrics(metrics.Registry) })

// DefaultDryRunMetrics returns the metrics registered with
// controller-runtime's registry (served on the manager's /metrics),
// creating them on first use; nil, logged, when a name is taken.
func DefaultDryRunMetrics() *DryRunMetrics {
	m, err := defaultDryRunMetrics()
	if err != nil {
		logf.Log.WithName("metrics").Error(err, "register dry-run stash metrics; they are not reported")
		return nil
	}
	return m
}

func (m *DryRunMetrics) set(entries, bytes int) {
	if m == nil {
		return
	}
	m.entries.Set(float64(entries))
	m.bytes.Set(float64(bytes))
}

func (m *DryRunMetrics) evicted(reason string) {
	if m != nil {
		m.evictions.WithLabelValues(reason).Inc()
	}
}

func (m *DryRunMetrics) refused() {
	if m != nil {
		m.refusals.Inc()
	}
}
