package bridge

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// metrics are the bridge's Prometheus series; see docs in the README.
type metrics struct {
	requests *prometheus.CounterVec // by mode and result (OK or a refusal reason)
	active   *prometheus.GaugeVec   // by mode
	endings  *prometheus.CounterVec // by mode and close code
	bytes    *prometheus.CounterVec // by mode and direction
	// VNC, per session (one per VM) and in total.
	vncLatency *prometheus.HistogramVec // in total
	vncReply   *prometheus.HistogramVec // in total
	vncUpdates *prometheus.CounterVec   // by namespace and name
	vncTier    *prometheus.GaugeVec     // by namespace and name
	vncBytes   *prometheus.CounterVec   // by namespace, name and direction
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
	m.vncLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "virtstation_bridge_vnc_request_to_update_seconds",
		Help: "From an update request the bridge forwarded to the update's last byte written to the client. " +
			"QEMU holds a request until the screen changes, so a still screen counts its wait.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 12), // 2 ms to 4 s
	}, nil)
	m.vncReply = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "virtstation_bridge_vnc_client_reply_seconds",
		Help: "From an update's last byte written to the client to the client's next update request: " +
			"the lag of the client's link, which the adaptive controller follows.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 12),
	}, nil)
	m.vncUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "virtstation_bridge_vnc_updates_total",
		Help: "FramebufferUpdates delivered, by the VM of the (single) VNC session; removed when the session ends.",
	}, []string{"namespace", "name"})
	m.vncTier = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "virtstation_bridge_vnc_tier",
		Help: "The adaptive controller's tier of the VM's VNC session: 0 good, 1 fair, 2 poor.",
	}, []string{"namespace", "name"})
	m.vncBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "virtstation_bridge_vnc_bytes_total",
		Help: "Bytes of the VM's VNC session by direction (to_vm, to_client); removed when the session ends.",
	}, []string{"namespace", "name", "direction"})
	reg.MustRegister(m.requests, m.active, m.endings, m.bytes, m.vncLatency, m.vncReply, m.vncUpdates, m.vncTier, m.vncBytes)
	return m
}

// vncSession is one VNC session's series; end removes them.
type vncSession struct {
	m               *metrics
	namespace, name string
	latency, reply  prometheus.Observer
	updates         prometheus.Counter
	tier            prometheus.Gauge
	toVM, toClient  prometheus.Counter
}

func (m *metrics) vncSession(namespace, name string) *vncSession {
	return &vncSession{
		m: m, namespace: namespace, name: name,
		latency:  m.vncLatency.WithLabelValues(),
		reply:    m.vncReply.WithLabelValues(),
		updates:  m.vncUpdates.WithLabelValues(namespace, name),
		tier:     m.vncTier.WithLabelValues(namespace, name),
		toVM:     m.vncBytes.WithLabelValues(namespace, name, "to_vm"),
		toClient: m.vncBytes.WithLabelValues(namespace, name, "to_client"),
	}
}

// Update implements vnc.Observer.
func (v *vncSession) Update(latency time.Duration) {
	v.latency.Observe(latency.Seconds())
	v.updates.Inc()
}

// Reply implements vnc.Observer.
func (v *vncSession) Reply(d time.Duration) { v.reply.Observe(d.Seconds()) }

// Tier implements vnc.Observer.
func (v *vncSession) Tier(t vnc.Tier) { v.tier.Set(float64(t)) }

// meter counts the session's bytes into its own series and into total.
func (v *vncSession) meter(total relay.Meter) relay.Meter { return vncMeter{v, total} }

func (v *vncSession) end() {
	v.m.vncUpdates.DeleteLabelValues(v.namespace, v.name)
	v.m.vncTier.DeleteLabelValues(v.namespace, v.name)
	v.m.vncBytes.DeleteLabelValues(v.namespace, v.name, "to_vm")
	v.m.vncBytes.DeleteLabelValues(v.namespace, v.name, "to_client")
}

type vncMeter struct {
	v     *vncSession
	total relay.Meter
}

func (m vncMeter) ClientToUpstream(n int) { m.v.toVM.Add(float64(n)); m.total.ClientToUpstream(n) }
func (m vncMeter) UpstreamToClient(n int) { m.v.toClient.Add(float64(n)); m.total.UpstreamToClient(n) }

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
