package bridge

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the bridge's Prometheus series; see docs in the README.
type metrics struct {
	requests *prometheus.CounterVec // by mode and result (OK or a refusal reason)
	active   *prometheus.GaugeVec   // by mode
	endings  *prometheus.CounterVec // by mode and close code
	bytes    *prometheus.CounterVec // by mode and direction
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_bridge_session_requests_total",
			Help: "Session requests by mode and result: OK or the reason they were refused.",
		}, []string{"mode", "result"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "virtstation_bridge_sessions_active",
			Help: "Sessions this replica is relaying, by mode.",
		}, []string{"mode"}),
		endings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_bridge_session_endings_total",
			Help: "Ended sessions by mode and WebSocket close code (4001 taken over, 4002 idle, 4004 upstream closed, ...).",
		}, []string{"mode", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "virtstation_bridge_bytes_total",
			Help: "Bytes relayed by mode and direction (to_vm, to_client).",
		}, []string{"mode", "direction"}),
	}
	reg.MustRegister(m.requests, m.active, m.endings, m.bytes)
	return m
}

func (m *metrics) ended(mode string, code int) {
	m.endings.WithLabelValues(mode, strconv.Itoa(code)).Inc()
}

// meter counts one session's bytes into the mode's series.
type meter struct{ toVM, toClient prometheus.Counter }

func (m *metrics) meter(mode string) meter {
	return meter{toVM: m.bytes.WithLabelValues(mode, "to_vm"), toClient: m.bytes.WithLabelValues(mode, "to_client")}
}

func (m meter) ClientToUpstream(n int) { m.toVM.Add(float64(n)) }
func (m meter) UpstreamToClient(n int) { m.toClient.Add(float64(n)) }
