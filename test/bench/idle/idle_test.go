package idle_test

import (
	"context"
	"debug/buildinfo"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/internal/testenv"
)

var (
	sessionsFlag   = flag.Int("sessions", 2000, "idle VNC sessions through the bridge (BenchmarkIdleSessions)")
	websockifyFlag = flag.Int("websockify-sessions", 100, "idle sessions through websockify (BenchmarkIdleSessions)")
	settleFlag     = flag.Duration("settle", 5*time.Second, "how long the open sessions idle before they are measured; the bridge's CPU is read over this span")
	leaseFlag      = flag.Duration("lease-duration", 15*time.Second, "the bridge's --lease-duration (default: the bridge's own)")
	concFlag       = flag.Int("open-concurrency", 32, "sessions dialled at once")
	profileFlag    = flag.String("heap-profiles", "", "write the bridge's heap profiles to this directory: before.pprof (baseline), open.pprof (sessions open), closed.pprof (after closing them)")
	closeFlag      = flag.Duration("close-deadline", 2*time.Minute, "how long closing every session may take to bring the bridge's goroutines back to the baseline")
	exemptFlag     = flag.Bool("exempt-sessions", true, "route the bridge's subresource dials to the API server's exempt priority level (see exemptSessions); false shows the limit without it")
	clientTLSFlag  = flag.Bool("client-tls", false, "serve the bridge over TLS (--cert-dir), as it is deployed, and dial it with wss://; websockify stays plain")
	bridgeArgsFlag = flag.String("bridge-args", "", "more flags for the bridge, space-separated, e.g. \"--kube-api-qps=50 --kube-api-burst=100\" (the client-side limit it had before)")
	rateFlag       = flag.Int("memprofilerate", 0, "run the bridge with GODEBUG=memprofilerate=N for a finer heap profile (0: Go's default, one sample per 512 KiB); the profiler's own records then add to the figures")
)

// goroutineSlack is how far above its baseline the bridge's goroutine count
// may settle once every session is closed. The baseline is taken with the
// process warm (one session opened and closed, so the pools and
// connections a first session creates exist), and idle; what can still
// differ is a net/http keep-alive connection or two (client-go's to the API
// server under a burst of requests, each one or two goroutines) and timers
// about to fire. An idle session holds two (the relay's two pumps), so the
// slack alone could hide one; the wait therefore also requires the
// sessions gauge and the silent source's connections at zero, and a leaked
// session does not pass unseen.
const goroutineSlack = 3

// Protocol constants.
const (
	// openDeadline bounds the wait, after every client's upgrade, for the
	// bridge to count every session and the silent source to see every
	// upstream connection.
	openDeadline = time.Minute
	// pollInterval spaces reads of /metrics and /proc while waiting.
	pollInterval = 200 * time.Millisecond
	// peerConcurrency dials websockify's sessions: each forks a Python
	// process, which takes a moment.
	peerConcurrency = 8
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Errors only: envtest's clients in this process.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(m.Run())
}

// size is one run's parameters.
type size struct {
	sessions, peerSessions int
	settle                 time.Duration
	lease                  time.Duration
	concurrency            int
	heapProfiles           string // directory; "" writes none
	closeDeadline          time.Duration
	memProfileRate         int
	exempt                 bool
	bridgeArgs             []string
	clientTLS              bool
}

// BenchmarkIdleSessions opens -sessions idle VNC sessions through the
// bridge and -websockify-sessions through websockify, and prints what they
// cost. One op is the whole measurement: run it with -benchtime 1x. See
// docs/benchmarks.md.
func BenchmarkIdleSessions(b *testing.B) {
	sz := size{
		sessions: *sessionsFlag, peerSessions: *websockifyFlag, settle: *settleFlag, lease: *leaseFlag,
		concurrency: *concFlag, heapProfiles: *profileFlag, closeDeadline: *closeFlag, memProfileRate: *rateFlag, exempt: *exemptFlag,
		bridgeArgs: strings.Fields(*bridgeArgsFlag), clientTLS: *clientTLSFlag,
	}
	for range b.N {
		r := run(b, sz)
		r.report(os.Stdout)
		for _, m := range r.metrics() {
			b.ReportMetric(m.value, m.unit)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// TestIdleSessions runs the benchmark at a tiny size, so it cannot rot:
// every session opens end to end, and closing them brings the bridge's
// goroutines back to the baseline. It asserts no memory figure.
func TestIdleSessions(t *testing.T) {
	for name, clientTLS := range map[string]bool{"plain": false, "tls": true} {
		t.Run(name, func(t *testing.T) {
			r := run(t, size{sessions: 20, peerSessions: 5, settle: time.Second, lease: *leaseFlag, concurrency: 8,
				closeDeadline: *closeFlag, exempt: true, clientTLS: clientTLS})
			if testing.Verbose() {
				r.report(os.Stdout)
			}
		})
	}
}

// run measures the bridge and then websockify, one after the other so they
// do not share the CPUs.
func run(tb testing.TB, sz size) result {
	tb.Helper()
	if err := checkFDLimit(sz.sessions, sz.peerSessions); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := result{size: sz}
	r.bridge = measureBridge(ctx, tb, sz)
	r.peer = measureWebsockify(ctx, tb, sz)
	return r
}

// result is one run's figures.
type result struct {
	size   size
	bridge bridgeResult
	peer   peerResult
}

// bridgeResult is the bridge's side.
type bridgeResult struct {
	before, after, closed sample
	open, close           time.Duration // opening every session; closing until the goroutines are back
	cpu                   time.Duration // the bridge's CPU over the settle span, sessions idle
	leasesHeldAfterClose  int           // Leases still naming the bridge once every session closed: releases that failed
	build                 string        // the bridge binary's VCS revision
}

// sample is the bridge's state at one point, right after a forced GC.
type sample struct {
	mem        memory
	heapAlloc  float64 // go_memstats_heap_alloc_bytes: live heap right after the GC
	heapInuse  float64 // go_memstats_heap_inuse_bytes: spans holding objects
	stackInuse float64 // go_memstats_stack_inuse_bytes: goroutine stacks
	sys        float64 // go_memstats_sys_bytes: all the runtime got from the OS
	goroutines float64 // go_goroutines
	active     float64 // virtstation_bridge_sessions_active{mode="vnc"}
}

// peerResult is websockify's side.
type peerResult struct {
	before, after memory
	// handlerRSS and handlerPSS are the median of the handler processes'.
	handlerRSS, handlerPSS int64
}

const activeVNC = `virtstation_bridge_sessions_active{mode="vnc"}`

// takeSample forces a GC in the bridge (writing its heap profile to
// profile, unless empty) and reads its metrics and /proc.
func takeSample(b *bridgeProc, profile string) (sample, error) {
	if err := b.heapProfile(profile); err != nil {
		return sample{}, err
	}
	m, err := b.metrics()
	if err != nil {
		return sample{}, err
	}
	for _, name := range []string{"go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines"} {
		if _, ok := m[name]; !ok {
			return sample{}, fmt.Errorf("the bridge's /metrics has no %s", name)
		}
	}
	mem, err := processMemory(b.pid())
	if err != nil {
		return sample{}, err
	}
	return sample{mem: mem, heapAlloc: m["go_memstats_heap_alloc_bytes"], heapInuse: m["go_memstats_heap_inuse_bytes"],
		stackInuse: m["go_memstats_stack_inuse_bytes"], sys: m["go_memstats_sys_bytes"], goroutines: m["go_goroutines"], active: m[activeVNC]}, nil
}

// profilePath is where the heap profile at point goes, "" for nowhere.
func profilePath(sz size, point string) string {
	if sz.heapProfiles == "" {
		return ""
	}
	return filepath.Join(sz.heapProfiles, point+".pprof")
}

// measureBridge opens sz.sessions idle VNC sessions through the bridge
// binary and measures it before, with them open, and after closing them.
func measureBridge(ctx context.Context, tb testing.TB, sz size) bridgeResult {
	tb.Helper()
	c, err := startCluster(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := c.stop(); err != nil {
			tb.Errorf("stop the cluster: %v", err)
		}
	}()
	if sz.exempt {
		if err := c.exemptSessions(ctx); err != nil {
			tb.Fatal(err)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := buildBridge(ctx, root, c.dir)
	if err != nil {
		tb.Fatal(err)
	}
	names := make([]string, sz.sessions)
	for i := range names {
		names[i] = fmt.Sprintf("vm-%05d", i)
	}
	if err := c.createVMs(ctx, append([]string{"warm-up"}, names...)); err != nil {
		tb.Fatal(err)
	}
	b, err := startBridge(ctx, bin, c.dir, c.kubeconfig, c.scraperToken, sz)
	if err != nil {
		tb.Fatal(err)
	}
	defer b.stop()
	fail := func(format string, args ...any) {
		tb.Helper()
		kept := keepLog(b.logPath)
		tb.Fatalf("%s\nthe bridge's first errors:\n%s\nits whole log: %s\nthe API server's flow control:\n%s",
			fmt.Sprintf(format, args...), b.firstErrors(5), kept, c.flowControlReport(context.WithoutCancel(ctx)))
	}
	// waitState waits until the bridge relays n VNC sessions, the silent
	// source has n connections open and (if goroutines > 0) the bridge runs
	// at most that many goroutines.
	waitState := func(n int, goroutines float64, deadline time.Duration) error {
		return poll(ctx, deadline, pollInterval, func() error {
			m, err := b.metrics()
			if err != nil {
				return err
			}
			open, _ := c.silent.counts()
			switch {
			case int(m[activeVNC]) != n:
				return fmt.Errorf("the bridge relays %v VNC sessions, want %d", m[activeVNC], n)
			case open != n:
				return fmt.Errorf("the silent source has %d connections, want %d", open, n)
			case goroutines > 0 && m["go_goroutines"] > goroutines:
				return fmt.Errorf("the bridge runs %v goroutines, want at most %v", m["go_goroutines"], goroutines)
			}
			return nil
		})
	}

	// Warm up: one session opened and closed, so that what a first session
	// creates once (connections, pools, the token's cached review) is in
	// the baseline.
	warm, err := openAll(ctx, 1, 1, bridgeDialer(b, c.userToken, []string{"warm-up"}))
	if err != nil {
		fail("warm-up session: %v", err)
	}
	if err := waitState(1, 0, openDeadline); err != nil {
		fail("warm-up session: %v", err)
	}
	warm.closeAll(1)
	if err := waitState(0, 0, openDeadline); err != nil {
		fail("warm-up session did not close: %v", err)
	}
	time.Sleep(sz.settle)

	r := bridgeResult{build: buildInfo(bin)}
	if r.before, err = takeSample(b, profilePath(sz, "before")); err != nil {
		fail("baseline: %v", err)
	}

	start := time.Now()
	open, err := openAll(ctx, sz.sessions, sz.concurrency, bridgeDialer(b, c.userToken, names))
	if err != nil {
		fail("open: %v", err)
	}
	defer open.closeAll(sz.concurrency) // on failure; a no-op after the close below
	if err := waitState(sz.sessions, 0, openDeadline); err != nil {
		fail("open: every client was upgraded, but %v", err)
	}
	r.open = time.Since(start)
	if held, err := c.heldLeases(ctx, replica); err != nil || held != sz.sessions {
		fail("open: the bridge holds %d session Leases, want %d (%v)", held, sz.sessions, err)
	}

	cpu0, err := cpuTime(b.pid())
	if err != nil {
		tb.Fatal(err)
	}
	time.Sleep(sz.settle)
	cpu1, err := cpuTime(b.pid())
	if err != nil {
		tb.Fatal(err)
	}
	r.cpu = cpu1 - cpu0
	if n, first := open.dropped(); n > 0 {
		fail("%d of %d sessions ended while idle; the first: %v", n, sz.sessions, first)
	}
	if r.after, err = takeSample(b, profilePath(sz, "open")); err != nil {
		fail("with the sessions open: %v", err)
	}
	if int(r.after.active) != sz.sessions {
		fail("the bridge relays %v VNC sessions at the measurement, want %d", r.after.active, sz.sessions)
	}

	start = time.Now()
	open.closeAll(sz.concurrency)
	if err := waitState(0, r.before.goroutines+goroutineSlack, sz.closeDeadline); err != nil {
		fail("closing every session did not bring the bridge back to its baseline of %v goroutines (slack %d): %v", r.before.goroutines, goroutineSlack, err)
	}
	r.close = time.Since(start)
	// A closed WebSocket keeps its connection for closeGrace (1 s) in a
	// timer, which no goroutine count shows: let those fire.
	time.Sleep(sz.settle)
	if r.closed, err = takeSample(b, profilePath(sz, "closed")); err != nil {
		fail("after closing: %v", err)
	}
	if r.leasesHeldAfterClose, err = c.heldLeases(ctx, replica); err != nil {
		tb.Fatal(err)
	}
	return r
}

// measureWebsockify opens sz.peerSessions idle sessions through websockify
// to a silent TCP source and sums its processes' memory before and after.
func measureWebsockify(ctx context.Context, tb testing.TB, sz size) peerResult {
	tb.Helper()
	src, err := listenSilent("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	p, err := startWebsockify(ctx, src.addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer p.stop()
	// waitProcs waits for the listener plus n handlers and n connections
	// at the source.
	waitProcs := func(n int, deadline time.Duration) error {
		return poll(ctx, deadline, pollInterval, func() error {
			pids, err := tree(p.pid())
			if err != nil {
				return err
			}
			open, _ := src.counts()
			if len(pids) != n+1 || open != n {
				return fmt.Errorf("websockify runs %d processes, want %d; the source has %d connections, want %d", len(pids), n+1, open, n)
			}
			return nil
		})
	}
	// startWebsockify's probe connected once; wait for its handler to go.
	if err := waitProcs(0, openDeadline); err != nil {
		tb.Fatalf("websockify at rest: %v", err)
	}
	time.Sleep(sz.settle)
	var r peerResult
	if r.before, err = treeMemory(p.pid()); err != nil {
		tb.Fatal(err)
	}
	open, err := openAll(ctx, sz.peerSessions, peerConcurrency, websockifyDialer(p.addr))
	if err != nil {
		tb.Fatalf("websockify: %v", err)
	}
	defer open.closeAll(peerConcurrency)
	if err := waitProcs(sz.peerSessions, openDeadline); err != nil {
		tb.Fatalf("websockify: every client was upgraded, but %v", err)
	}
	time.Sleep(sz.settle)
	if n, first := open.dropped(); n > 0 {
		tb.Fatalf("websockify: %d of %d sessions ended while idle; the first: %v", n, sz.peerSessions, first)
	}
	if r.after, err = treeMemory(p.pid()); err != nil {
		tb.Fatal(err)
	}
	children, err := childMemory(p.pid())
	if err != nil {
		tb.Fatal(err)
	}
	r.handlerRSS = median(children, func(m memory) int64 { return m.RSS })
	r.handlerPSS = median(children, func(m memory) int64 { return m.PSS })
	if r.after.Procs != sz.peerSessions+1 {
		tb.Fatalf("websockify: %d processes at the measurement, want %d", r.after.Procs, sz.peerSessions+1)
	}
	open.closeAll(peerConcurrency)
	if err := waitProcs(0, openDeadline); err != nil {
		tb.Fatalf("websockify: closing every session: %v", err)
	}
	return r
}

// median is the median of f over ms; 0 for none.
func median(ms []memory, f func(memory) int64) int64 {
	if len(ms) == 0 {
		return 0
	}
	v := make([]int64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// goalKiB is issue 8's goal for an idle bridge session.
const goalKiB = 64

// buildInfo names the VCS revision a binary was built from, and whether
// the tree had changes.
func buildInfo(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "build info: " + err.Error()
	}
	rev, modified := "unknown revision", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " with uncommitted changes"
		}
	}
	return "built from " + rev + modified + ", " + info.GoVersion
}

// kib is bytes in KiB.
func kib(b float64) float64 { return b / 1024 }

// metric is one b.ReportMetric figure.
type metric struct {
	value float64
	unit  string
}

// perSession is (after-before)/n.
func perSession(before, after float64, n int) float64 { return (after - before) / float64(n) }

func (r result) metrics() []metric {
	n, m := r.size.sessions, r.size.peerSessions
	b, p := r.bridge, r.peer
	return []metric{
		{kib(perSession(float64(b.before.mem.RSS), float64(b.after.mem.RSS), n)), "bridge-rss-KiB/session"},
		{kib(perSession(float64(b.before.mem.PSS), float64(b.after.mem.PSS), n)), "bridge-pss-KiB/session"},
		{kib(perSession(b.before.heapAlloc, b.after.heapAlloc, n)), "bridge-heap-KiB/session"},
		{kib(perSession(b.before.stackInuse, b.after.stackInuse, n)), "bridge-stack-KiB/session"},
		{perSession(b.before.goroutines, b.after.goroutines, n), "bridge-goroutines/session"},
		{100 * b.cpu.Seconds() / r.size.settle.Seconds(), "bridge-idle-cpu-%"},
		{kib(perSession(float64(p.before.RSS), float64(p.after.RSS), m)), "websockify-rss-KiB/session"},
		{kib(perSession(float64(p.before.PSS), float64(p.after.PSS), m)), "websockify-pss-KiB/session"},
		{float64(p.after.Procs), "websockify-procs"},
	}
}

// report prints the figures as the tables docs/benchmarks.md shows.
func (r result) report(w io.Writer) {
	n, m := r.size.sessions, r.size.peerSessions
	b, p := r.bridge, r.peer
	client := "plain WebSocket"
	if r.size.clientTLS {
		client = "TLS"
	}
	fmt.Fprintf(w, "\nBridge (%s): %d idle VNC sessions over %s (Lease duration %v, subresource dials exempt from API Priority and Fairness: %v, flags %q), opened in %.1f s, closed (goroutines back to baseline) in %.1f s\n\n",
		b.build, n, client, r.size.lease, r.size.exempt, r.size.bridgeArgs, b.open.Seconds(), b.close.Seconds())
	fmt.Fprintln(w, "| bridge | before | with sessions | after close | per session |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	row := func(name string, before, after, closed float64, unit func(float64) string, per string) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, unit(before), unit(after), unit(closed), per)
	}
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	perKiB := func(before, after float64) string { return fmt.Sprintf("%.1f KiB", kib(perSession(before, after, n))) }
	row("RSS (VmRSS)", float64(b.before.mem.RSS), float64(b.after.mem.RSS), float64(b.closed.mem.RSS), mib, perKiB(float64(b.before.mem.RSS), float64(b.after.mem.RSS)))
	row("PSS (smaps_rollup)", float64(b.before.mem.PSS), float64(b.after.mem.PSS), float64(b.closed.mem.PSS), mib, perKiB(float64(b.before.mem.PSS), float64(b.after.mem.PSS)))
	row("Go heap alloc (after GC)", b.before.heapAlloc, b.after.heapAlloc, b.closed.heapAlloc, mib, perKiB(b.before.heapAlloc, b.after.heapAlloc))
	row("Go heap in use", b.before.heapInuse, b.after.heapInuse, b.closed.heapInuse, mib, perKiB(b.before.heapInuse, b.after.heapInuse))
	row("goroutine stacks", b.before.stackInuse, b.after.stackInuse, b.closed.stackInuse, mib, perKiB(b.before.stackInuse, b.after.stackInuse))
	row("Go runtime sys", b.before.sys, b.after.sys, b.closed.sys, mib, perKiB(b.before.sys, b.after.sys))
	row("goroutines", b.before.goroutines, b.after.goroutines, b.closed.goroutines, count,
		fmt.Sprintf("%.2f", perSession(b.before.goroutines, b.after.goroutines, n)))
	fmt.Fprintln(w, "\nRSS counts the pages a process touched; the Go heap counts what it allocated. A buffer allocated from fresh memory and never written is in the heap, not in RSS, until traffic fills it.")
	fmt.Fprintf(w, "\nbridge CPU with the sessions idle: %.1f %% of one core (%v over %v)\n", 100*b.cpu.Seconds()/r.size.settle.Seconds(), b.cpu, r.size.settle)
	fmt.Fprintf(w, "after close: %d of %d session Leases still name the bridge (their release failed; they are held until they expire, %v)\n", b.leasesHeldAfterClose, n, r.size.lease)

	fmt.Fprintf(w, "\nwebsockify: %d idle sessions\n\n", m)
	fmt.Fprintln(w, "| websockify (listener + handlers) | before | with sessions | per session |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| processes | %d | %d | %.2f |\n", p.before.Procs, p.after.Procs, perSession(float64(p.before.Procs), float64(p.after.Procs), m))
	fmt.Fprintf(w, "| RSS, summed | %s | %s | %.1f KiB |\n", mib(float64(p.before.RSS)), mib(float64(p.after.RSS)), kib(perSession(float64(p.before.RSS), float64(p.after.RSS), m)))
	fmt.Fprintf(w, "| PSS, summed | %s | %s | %.1f KiB |\n", mib(float64(p.before.PSS)), mib(float64(p.after.PSS)), kib(perSession(float64(p.before.PSS), float64(p.after.PSS), m)))
	fmt.Fprintf(w, "\none handler process (median): RSS %.1f MiB, PSS %.1f MiB\n", float64(p.handlerRSS)/(1<<20), float64(p.handlerPSS)/(1<<20))
	verdict := func(v float64) string {
		if v <= goalKiB {
			return "met"
		}
		return "NOT met"
	}
	rss := kib(perSession(float64(b.before.mem.RSS), float64(b.after.mem.RSS), n))
	heap := kib(perSession(b.before.heapAlloc, b.after.heapAlloc, n))
	fmt.Fprintf(w, "\ngoal: <= %d KiB per idle bridge session: RSS %.1f KiB, %s; Go heap %.1f KiB, %s\n", goalKiB, rss, verdict(rss), heap, verdict(heap))
}
