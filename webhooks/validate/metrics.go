package validate

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/policy"
)

// Metrics are the policy engine's Prometheus metrics:
//
//	virtstation_policy_load_errors_total               policy sets that failed to load
//	virtstation_policy_revision_info{revision}         1 for the active policy set
//	virtstation_policy_dryrun_violations_total{rule}   violations of rules in dryrun mode
//	virtstation_policy_eval_deadline_exceeded_total{module}
//	                                                   admissions denied because their evaluation ran past its deadline
//
// Its methods are safe for concurrent use.
type Metrics struct {
	loadErrors prometheus.Counter
	revision   *prometheus.GaugeVec
	dryRun     *prometheus.CounterVec
	deadline   *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg. Collectors
// reg already has (from an earlier NewMetrics) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := newMetrics()
	var err error
	if m.loadErrors, err = register(reg, m.loadErrors); err != nil {
		return nil, err
	}
	if m.revision, err = register(reg, m.revision); err != nil {
		return nil, err
	}
	if m.dryRun, err = register(reg, m.dryRun); err != nil {
		return nil, err
	}
	if m.deadline, err = register(reg, m.deadline); err != nil {
		return nil, err
	}
	return m, nil
}

// newMetrics creates unregistered metrics.
func newMetrics() *Metrics {
	return &Metrics{
		loadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "virtstation_policy_load_errors_total",
			Help: "Policy sets (shipped plus operator ConfigMaps) that failed to compile or pass their tests; the previous set stayed active.",
		}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "virtstation_policy_revision_info",
			Help: "The active policy set: 1 for its revision.",
		}, []string{"revision"}),
		dryRun: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_policy_dryrun_violations_total",
			Help: "Violations of rules in dryrun enforcement mode, which were admitted.",
		}, []string{"rule"}),
		deadline: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_policy_eval_deadline_exceeded_total",
			Help: "VM admissions denied because the policy evaluation ran past its deadline, by the module the time went to (unknown when none was singled out).",
		}, []string{"module"}),
	}
}

// register registers c, or returns the equal collector reg already has.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

var defaultMetrics = sync.OnceValues(func() (*Metrics, error) { return NewMetrics(metrics.Registry) })

// DefaultMetrics returns the metrics registered with controller-runtime's
// registry (served on the manager's /metrics), creating them on first use.
func DefaultMetrics() *Metrics {
	m, err := defaultMetrics()
	if err != nil {
		// Another collector took one of the names: count into unregistered
		// metrics rather than fail.
		logf.Log.WithName("policy-metrics").Error(err, "register policy metrics")
		return newMetrics()
	}
	return m
}

// LoadFailed counts a policy set that failed to load.
func (m *Metrics) LoadFailed() { m.loadErrors.Inc() }

// SetRevision records the active policy set's revision.
func (m *Metrics) SetRevision(revision string) {
	m.revision.Reset()
	m.revision.WithLabelValues(revision).Set(1)
}

// DryRunViolation counts a violation admitted because its rule is in dryrun
// mode. It fits VMHandler.DryRun.
func (m *Metrics) DryRunViolation(v policy.Violation) { m.dryRun.WithLabelValues(v.ID).Inc() }

// DeadlineExceeded counts an admission denied because its evaluation ran
// past its deadline, most of it in module ("" when none was singled out).
func (m *Metrics) DeadlineExceeded(module string) {
	if module == "" {
		module = "unknown"
	}
	m.deadline.WithLabelValues(module).Inc()
}
