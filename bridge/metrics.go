package bridge

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// metrics are the bridge's Prometheus series; docs/bridge.md lists them.
type metrics struct {
	requests *prometheus.CounterVec // by mode and result (OK or a refusal reason)
	active   *prometheus.GaugeVec   // by mode
	endings  *prometheus.CounterVec // by mode and close code
	bytes    *prometheus.CounterVec // by mode and direction
	// VNC, per session (one per VM) and in total.
	vncLatency prometheus.Observer // in total
	vncReply   prometheus.Observer // in total
	vnc        *vncSessions        // per VM: updates, tier, bytes
	// Start on connect (lifecycle.go).
	starts           *prometheus.CounterVec // by result
	startToConnected prometheus.Observer
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
		vnc: newVNCSessions(),
	}
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "virtstation_bridge_vnc_request_to_update_seconds",
		Help: "From an update request the bridge forwarded to the update's last byte written to the client. " +
			"QEMU holds a request until the screen changes, so a still screen counts its wait.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 12), // 2 ms to 4 s
	})
	reply := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "virtstation_bridge_vnc_client_reply_seconds",
		Help: "From an update's last byte written to the client to the client's next update request: " +
			"the lag of the client's link, which the adaptive controller follows.",
		Buckets: prometheus.ExponentialBuckets(0.002, 2, 12),
	})
	m.vncLatency, m.vncReply = latency, reply
	m.starts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "virtstation_bridge_starts_total",
		Help: "Starts of stopped VMs the browser asked for, by result: started, running (already), forbidden, refused (KubeVirt's 409), error.",
	}, []string{"result"})
	startToConnected := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "virtstation_bridge_start_to_connected_seconds",
		Help:    "From a start this replica made to the first session it connected to that VM: what a user waits for a stopped workstation.",
		Buckets: prometheus.ExponentialBuckets(1, 1.5, 14), // 1 s to about 3 min
	})
	m.startToConnected = startToConnected
	reg.MustRegister(m.requests, m.active, m.endings, m.bytes, latency, reply, m.vnc, m.starts, startToConnected)
	return m
}

// vncSession is one VNC session's figures, exposed by vncSessions while
// the session is its VM's latest; end removes them.
type vncSession struct {
	m              *metrics
	key            types.NamespacedName
	updates        atomic.Uint64
	tier           atomic.Int32
	toVM, toClient atomic.Uint64
}

func (m *metrics) vncSession(namespace, name string) *vncSession {
	v := &vncSession{m: m, key: types.NamespacedName{Namespace: namespace, Name: name}}
	m.vnc.add(v)
	return v
}

// Update implements vnc.Observer.
func (v *vncSession) Update(latency time.Duration) {
	v.m.vncLatency.Observe(latency.Seconds())
	v.updates.Add(1)
}

// Reply implements vnc.Observer.
func (v *vncSession) Reply(d time.Duration) { v.m.vncReply.Observe(d.Seconds()) }

// Tier implements vnc.Observer.
func (v *vncSession) Tier(t vnc.Tier) { v.tier.Store(int32(t)) }

// meter counts the session's bytes into its own figures and into total.
func (v *vncSession) meter(total relay.Meter) relay.Meter { return vncMeter{v, total} }

func (v *vncSession) end() { v.m.vnc.remove(v) }

type vncMeter struct {
	v     *vncSession
	total relay.Meter
}

func (m vncMeter) ClientToUpstream(n int) { m.v.toVM.Add(uint64(n)); m.total.ClientToUpstream(n) }
func (m vncMeter) UpstreamToClient(n int) { m.v.toClient.Add(uint64(n)); m.total.UpstreamToClient(n) }

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

// activityWrites counts the writes of the VMs' activity Leases into reg,
// by result (activity.Result), and returns the Recorder's Count.
func activityWrites(reg prometheus.Registerer) func(activity.Result) {
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "virtstation_bridge_activity_writes_total",
		Help: "Writes of VMs' activity Leases on user input and keep-running requests, by result: " +
			"written, skipped-recent (another replica wrote it within the interval), conflict (another replica won the race), " +
			"dropped (the write queue was full), error.",
	}, []string{"result"})
	for _, r := range []activity.Result{activity.Written, activity.SkippedRecent, activity.Conflict, activity.Dropped, activity.Error} {
		writes.WithLabelValues(string(r))
	}
	reg.MustRegister(writes)
	return func(r activity.Result) { writes.WithLabelValues(string(r)).Inc() }
}
