package vnc_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/virtstation/virtstation/bridge/vnc"
	"github.com/virtstation/virtstation/internal/qemu"
)

// Spans of one measured session. The warm-up covers the first full update
// and gives the controller two of its 500 ms windows; the measured span
// holds 14-45 updates on the links below.
const (
	warmUp     = time.Second
	measureFor = 4 * time.Second
)

// benchLinks are the client's link rates: a modest mobile link and a poor
// one. At noVNC's compression level the moving screen's updates (about
// 25 KB each) at QEMU's pace need more than either; at 1 MB/s the link
// is not the bottleneck and both variants measure QEMU's own pace.
var benchLinks = []struct {
	name string
	rate float64 // bytes a second
}{
	{"250KBps", 250e3},
	{"100KBps", 100e3},
}

// BenchmarkAdaptiveVNC drives QEMU's moving-screen guest through the
// bridge's VNC path to a noVNC-like client on a throttled link, with the
// adaptive controller off and on, and reports what the client got: bytes
// read off the link a second, bytes per update, updates a second and
// request-to-update latency as the user sees it (from the client's
// request to the update's last byte read by the client); beside them the
// controller's own latency, the client's reply time (see probe), time in
// each tier, requests the proxy sent itself, and CPU. Each adaptive=on
// run also reports its ratios to the median of the adaptive=off runs on
// the same link (with -count N, Go runs the N off runs first). One run of
// a variant is one session; ns/op means nothing here and is left out. See
// docs/benchmarks.md.
func BenchmarkAdaptiveVNC(b *testing.B) {
	vm, upstream := startMovingScreen(b)
	for _, link := range benchLinks {
		b.Run("link="+link.name, func(b *testing.B) {
			var offRuns []sample
			for _, adaptive := range []bool{false, true} {
				b.Run("adaptive="+onOff(adaptive), func(b *testing.B) {
					var s sample
					for range b.N {
						s = s.merge(measureSession(b, vm, upstream, session{rate: link.rate, adaptive: adaptive, level: noVNCCompressionLevel}))
					}
					s.report(b)
					if !adaptive {
						offRuns = append(offRuns, s)
						return
					}
					if len(offRuns) > 0 {
						reportRatios(b, s, offRuns)
					}
				})
			}
		})
	}
}

// BenchmarkVNCCompressLevel is what the tiers' SetEncodings rewrite would
// do if it were applied: the same rig with the controller off and a
// client that itself asks for compression level 2 (noVNC's default, kept
// in the Good tier), 6 (Fair's) or 9 (Poor's), on the slower link.
func BenchmarkVNCCompressLevel(b *testing.B) {
	vm, upstream := startMovingScreen(b)
	link := benchLinks[len(benchLinks)-1]
	for _, level := range []int{noVNCCompressionLevel, 6, 9} {
		b.Run(fmt.Sprintf("link=%s/level=%d", link.name, level), func(b *testing.B) {
			var s sample
			for range b.N {
				s = s.merge(measureSession(b, vm, upstream, session{rate: link.rate, level: level}))
			}
			s.report(b)
		})
	}
}

// startMovingScreen starts QEMU with internal/qemu's moving-screen guest, which
// repaints the whole 640x400 screen 18 times a second, and the upstream
// stand-in in front of its VNC socket.
func startMovingScreen(b *testing.B) (*qemu.VM, string) {
	b.Helper()
	vm, err := qemu.StartWith(context.WithoutCancel(b.Context()), b.TempDir(), qemu.Options{Guest: qemu.MovingScreen})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := vm.Stop(); err != nil {
			b.Error(err)
		}
	})
	return vm, startUpstream(b, vm.VNCSocket)
}

// session is how one measured session runs.
type session struct {
	rate     float64 // the client's link, bytes a second
	adaptive bool    // the controller
	level    int     // the compression level the client asks for
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// sample is what one or more measured spans saw.
type sample struct {
	span        time.Duration
	updateBytes int64 // RFB bytes of the updates the client received
	clientLink  int64 // bytes the client read off the link, WebSocket framing included
	bridgeSent  int64 // bytes the bridge wrote to the client
	latencies   []time.Duration
	bridgeLat   []time.Duration // the controller's own view of latency
	replies     []time.Duration // from the bridge's last write to the client's next request
	qemuCPU     time.Duration
	procCPU     time.Duration // this process: bridge path, client and upstream stand-in
	tierTime    [3]time.Duration
	tierMoves   int
	rects       map[int32]int
	requests    requestCounts // over whole sessions, warm-up included
}

func (s sample) merge(o sample) sample {
	s.span += o.span
	s.updateBytes += o.updateBytes
	s.clientLink += o.clientLink
	s.bridgeSent += o.bridgeSent
	s.latencies = append(s.latencies, o.latencies...)
	s.bridgeLat = append(s.bridgeLat, o.bridgeLat...)
	s.replies = append(s.replies, o.replies...)
	s.qemuCPU += o.qemuCPU
	s.procCPU += o.procCPU
	for i := range s.tierTime {
		s.tierTime[i] += o.tierTime[i]
	}
	if s.rects == nil {
		s.rects = map[int32]int{}
	}
	for k, v := range o.rects {
		s.rects[k] += v
	}
	s.tierMoves += o.tierMoves
	s.requests.fromClient += o.requests.fromClient
	s.requests.held += o.requests.held
	s.requests.fromProxy += o.requests.fromProxy
	s.requests.rewrites += o.requests.rewrites
	return s
}

func (s sample) bytesPerSec() float64   { return float64(s.clientLink) / s.span.Seconds() }
func (s sample) updatesPerSec() float64 { return float64(len(s.latencies)) / s.span.Seconds() }
func (s sample) bytesPerUpdate() float64 {
	return float64(s.updateBytes) / float64(max(1, len(s.latencies)))
}
func (s sample) p50() float64 { return ms(percentile(s.latencies, 0.50)) }
func (s sample) p99() float64 { return ms(percentile(s.latencies, 0.99)) }

func (s sample) report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(s.bytesPerSec(), "bytes/s")
	b.ReportMetric(s.bytesPerUpdate(), "bytes/update")
	b.ReportMetric(s.updatesPerSec(), "updates/s")
	b.ReportMetric(s.p50(), "p50-ms")
	b.ReportMetric(s.p99(), "p99-ms")
	b.ReportMetric(ms(percentile(s.bridgeLat, 0.50)), "bridge-p50-ms")
	b.ReportMetric(ms(percentile(s.replies, 0.50)), "reply-p50-ms")
	b.ReportMetric(100*s.qemuCPU.Seconds()/s.span.Seconds(), "qemu-cpu-%")
	b.ReportMetric(100*s.procCPU.Seconds()/s.span.Seconds(), "proc-cpu-%")
	b.ReportMetric(100*s.tierTime[vnc.Fair].Seconds()/s.span.Seconds(), "fair-%")
	b.ReportMetric(100*s.tierTime[vnc.Poor].Seconds()/s.span.Seconds(), "poor-%")
	b.ReportMetric(float64(s.tierMoves), "tier-moves")
	b.ReportMetric(float64(s.requests.fromProxy), "proxy-reqs")
	b.Logf("measured %d updates of %d bytes in all in %v; the client read %d bytes off the link, the bridge wrote %d; rectangles by encoding %v",
		len(s.latencies), s.updateBytes, s.span.Round(time.Millisecond), s.clientLink, s.bridgeSent, s.rects)
	b.Logf("whole sessions: the client sent %d update requests, the proxy held %d, sent %d of its own and %d other messages (SetEncodings)",
		s.requests.fromClient, s.requests.held, s.requests.fromProxy, s.requests.rewrites)
}

// reportRatios reports on/off ratios against the median of the off runs.
func reportRatios(b *testing.B, on sample, off []sample) {
	ratios := []struct {
		unit string
		f    func(sample) float64
	}{
		{"bytes/s", sample.bytesPerSec},
		{"bytes/update", sample.bytesPerUpdate},
		{"updates/s", sample.updatesPerSec},
		{"p50", sample.p50},
		{"p99", sample.p99},
	}
	line := "on/off:"
	for _, r := range ratios {
		var offs []float64
		for _, o := range off {
			offs = append(offs, r.f(o))
		}
		ratio := r.f(on) / medianOf(offs)
		b.ReportMetric(ratio, "ratio-"+r.unit)
		line += fmt.Sprintf(" %s %.2f", r.unit, ratio)
	}
	b.Log(line)
}

// measureSession runs one session through a fresh bridge: warm-up, then
// the measured span.
func measureSession(b *testing.B, vm *qemu.VM, upstreamURL string, sess session) sample {
	b.Helper()
	obs := &observer{}
	meter := &meter{}
	url, ended := startBridge(b, upstreamURL, sess.adaptive, obs, meter)
	rec := &recorder{}
	ctx, cancel := context.WithTimeout(b.Context(), rigTimeout)
	c, err := dialNoVNC(ctx, url, sess.rate, sess.level, rec)
	cancel()
	if err != nil {
		b.Fatalf("connect through the bridge: %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- c.run() }()
	select {
	case <-time.After(warmUp):
	case err := <-runErr:
		b.Fatalf("the client stopped during the warm-up: %v", err)
	}

	qemu0, proc0 := cpuTimes(b, vm)
	link0, sent0 := c.link.bytesRead(), meter.sent.Load()
	t0 := time.Now()
	rec.start()
	obs.start(t0)
	select {
	case <-time.After(measureFor):
	case err := <-runErr:
		b.Fatalf("the client stopped: %v", err)
	}
	t1 := time.Now()
	latencies, updateBytes, rects := rec.stop()
	bridgeLat, replies, tierTime, tierMoves := obs.stop(t1)
	qemu1, proc1 := cpuTimes(b, vm)
	s := sample{
		span: t1.Sub(t0), updateBytes: updateBytes, clientLink: c.link.bytesRead() - link0, bridgeSent: meter.sent.Load() - sent0,
		latencies: latencies, bridgeLat: bridgeLat, replies: replies, qemuCPU: qemu1 - qemu0, procCPU: proc1 - proc0, tierTime: tierTime, tierMoves: tierMoves, rects: rects,
	}

	c.close()
	if err := <-runErr; err != nil {
		b.Logf("the client's read ended with %v", err)
	}
	select {
	case bs := <-ended:
		s.requests = bs.probe.requests()
		b.Logf("the session ended with %d %q in tier %v", bs.end.Code, bs.end.Reason, bs.probe.Tier())
	case <-time.After(rigTimeout):
		b.Fatal("the bridge did not end the session after the client left")
	}
	if len(latencies) == 0 {
		b.Fatal("no update reached the client in the measured span")
	}
	return s
}

// cpuTimes are QEMU's and this process's CPU time so far.
func cpuTimes(b *testing.B, vm *qemu.VM) (qemuCPU, procCPU time.Duration) {
	b.Helper()
	qemuCPU, err := vm.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return qemuCPU, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// meter counts the bytes the bridge wrote to the client (relay.Meter).
type meter struct{ sent atomic.Int64 }

func (m *meter) ClientToUpstream(int)   {}
func (m *meter) UpstreamToClient(n int) { m.sent.Add(int64(n)) }

// observer is the bridge's metrics stand-in (vnc.Observer): the
// controller's own latencies and the time spent in each tier during the
// measured span.
type observer struct {
	mu        sync.Mutex
	measuring bool
	latencies []time.Duration
	replies   []time.Duration // see probe
	tier      vnc.Tier
	since     time.Time
	tierTime  [3]time.Duration
	tierMoves int
}

func (o *observer) Update(latency time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.measuring {
		o.latencies = append(o.latencies, latency)
	}
}

// Reply records the client reply times the proxy measures.
func (o *observer) Reply(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.measuring {
		o.replies = append(o.replies, d)
	}
}

func (o *observer) Tier(t vnc.Tier) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.measuring {
		o.tierTime[o.tier] += now.Sub(o.since)
		o.tierMoves++
	}
	o.tier, o.since = t, now
}

func (o *observer) start(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.measuring, o.since, o.latencies, o.replies, o.tierTime, o.tierMoves = true, now, nil, nil, [3]time.Duration{}, 0
}

func (o *observer) stop(now time.Time) (latencies, replies []time.Duration, tierTime [3]time.Duration, tierMoves int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tierTime[o.tier] += now.Sub(o.since)
	o.measuring = false
	return slices.Clone(o.latencies), slices.Clone(o.replies), o.tierTime, o.tierMoves
}

var _ vnc.Observer = (*observer)(nil)

// percentile is the nearest-rank p-quantile of d; zero when d is empty.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
