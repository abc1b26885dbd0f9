package audit

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/policyreport"
)

// Metrics are the audit's Prometheus metrics:
//
//	virtstation_audit_violations{namespace,rule,result}  VMs whose result for the rule is fail, warn or error
//	virtstation_audit_duration_seconds                   time to audit one namespace
//	virtstation_audit_vms_audited_total                  VMs audited (evaluated or found unchanged)
//	virtstation_audit_vms_evaluated_total                VMs whose policies were evaluated
//	virtstation_audit_report_writes_total{kind,verb}     reports created, updated or deleted
type Metrics struct {
	violations *prometheus.GaugeVec
	duration   prometheus.Histogram
	audited    prometheus.Counter
	evaluated  prometheus.Counter
	writes     *prometheus.CounterVec
}

func newMetrics() *Metrics {
	return &Metrics{
		violations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "virtstation_audit_violations",
			Help: "Managed VMs whose last audit result for a rule is fail, warn or error, by namespace, rule and result.",
		}, []string{"namespace", "rule", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "virtstation_audit_duration_seconds",
			Help:    "Time to audit one namespace: evaluate its managed VMs and sync its reports.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		audited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "virtstation_audit_vms_audited_total",
			Help: "Managed VMs audited (evaluated, or found unchanged since their last evaluation).",
		}),
		evaluated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "virtstation_audit_vms_evaluated_total",
			Help: "Managed VMs whose policies the audit evaluated.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_audit_report_writes_total",
			Help: "Policy reports the audit created, updated or deleted, by kind.",
		}, []string{"kind", "verb"}),
	}
}

var defaultMetrics = sync.OnceValue(func() *Metrics {
	m := newMetrics()
	for _, c := range []prometheus.Collector{m.violations, m.duration, m.audited, m.evaluated, m.writes} {
		// A second registration (tests start several managers) keeps the first.
		_ = metrics.Registry.Register(c)
	}
	return m
})

// DefaultMetrics are the metrics registered with controller-runtime's
// registry (served on the manager's /metrics).
func DefaultMetrics() *Metrics { return defaultMetrics() }

// setViolations replaces the namespace's violation gauges.
func (m *Metrics) setViolations(namespace string, results []policyreport.Result) {
	m.violations.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	counts := map[[2]string]int{}
	for _, r := range results {
		if r.Result != policyreport.Pass {
			counts[[2]string{r.Rule, string(r.Result)}]++
		}
	}
	for k, n := range counts {
		m.violations.WithLabelValues(namespace, k[0], k[1]).Set(float64(n))
	}
}

func (m *Metrics) wrote(gvk schema.GroupVersionKind, verb string) {
	m.writes.WithLabelValues(gvk.Kind+"."+gvk.Group, verb).Inc()
}
