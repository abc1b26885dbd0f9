package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// profileEnv names a file for a CPU profile of the bridge's process
// (vncbridge -cpuprofile), written when the rig stops.
const profileEnv = "VNCRELAY_BRIDGE_CPUPROFILE"

// copyRelayBuffer is path (e)'s buffer: what the bridge's ReadAheadConn
// reads at once.
const copyRelayBuffer = 256 << 10

// spans are the lengths of one comparison.
type spans struct {
	rounds int           // each round measures every path once, in turn
	warmUp time.Duration // of each bulk session, before measuring
	bulk   time.Duration // measured bulk transfer per session
	echoes int           // unmeasured round trips before measuring
	echo   time.Duration // measured round trips per session
}

// path is one way from the client to the source.
type path struct {
	name  string
	label string
	dial  func(id string) (*Client, error)
	proc  *Proc
	// bridge says the proxy prints a line per session (vncbridge).
	bridge bool
}

// sample is one round's measurements of one path.
type sample struct {
	mbps      float64 // bulk MB/s (10^6 bytes) read by the client
	cpuPerGB  float64 // proxy CPU seconds per GB (10^9 bytes) relayed
	rigPerGB  float64 // the benchmark process's CPU seconds per GB: source, client, stand-in
	p50, p99  time.Duration
	msgsPerS  float64
	sessionOK string // the bridge's session line, when it prints one
}

// rig is the source, the upstream stand-in and the four proxies.
type rig struct {
	paths []path
}

// startRig builds the two proxy programs, starts the source, the stand-in
// for the API server (both in this process) and the proxies (each its own
// process).
func startRig(tb testing.TB) *rig {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	bin := tb.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/tcprelay", "./cmd/vncbridge")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	src, err := NewSource()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = src.Close() })
	up := NewUpstream(src.Addr())
	tb.Cleanup(up.Close)

	tcp, err := StartListener(ctx, "tcprelay", filepath.Join(bin, "tcprelay"), "-target", src.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(tcp.Stop)
	tcpCopy, err := StartListener(ctx, "tcprelay", filepath.Join(bin, "tcprelay"), "-target", src.Addr(),
		"-buffer", strconv.Itoa(copyRelayBuffer))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(tcpCopy.Stop)
	wsfy, err := StartWebsockify(ctx, src.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(wsfy.Stop)
	brArgs := []string{"-upstream", up.URL()}
	if f := os.Getenv(profileEnv); f != "" {
		brArgs = append(brArgs, "-cpuprofile", f)
	}
	br, err := StartListener(ctx, "vncbridge", filepath.Join(bin, "vncbridge"), brArgs...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(br.Stop)
	return &rig{paths: []path{
		{name: "a", label: "tcp relay (io.Copy)", proc: tcp, dial: func(string) (*Client, error) { return DialTCP(tcp.Addr) }},
		{name: "b", label: "websockify 0.10", proc: wsfy, dial: func(string) (*Client, error) { return DialWS("ws://" + wsfy.Addr + "/") }},
		{name: "c", label: "bridge, adaptive off", proc: br, bridge: true, dial: func(id string) (*Client, error) {
			return DialWS("ws://" + br.Addr + "/vnc?adaptive=off&session=" + id)
		}},
		{name: "d", label: "bridge, adaptive on", proc: br, bridge: true, dial: func(id string) (*Client, error) {
			return DialWS("ws://" + br.Addr + "/vnc?adaptive=on&session=" + id)
		}},
		{name: "e", label: "tcp relay (read/write, 256 KiB)", proc: tcpCopy, dial: func(string) (*Client, error) { return DialTCP(tcpCopy.Addr) }},
	}}
}

// compare runs sp.rounds rounds; each measures every path's bulk session
// then its echo session, the paths in a rotating order so that none always
// goes first. It returns each path's samples by name.
func (r *rig) compare(tb testing.TB, sp spans) map[string][]sample {
	tb.Helper()
	out := map[string][]sample{}
	for round := range sp.rounds {
		for i := range r.paths {
			p := r.paths[(round+i)%len(r.paths)]
			s, err := r.measure(p, sp)
			if err != nil {
				tb.Fatalf("round %d, path %s (%s): %v", round+1, p.name, p.label, err)
			}
			out[p.name] = append(out[p.name], s)
		}
	}
	return out
}

func (r *rig) measure(p path, sp spans) (sample, error) {
	var s sample
	if err := r.bulk(p, sp, &s); err != nil {
		return s, fmt.Errorf("bulk: %w", err)
	}
	if err := r.roundTrips(p, sp, &s); err != nil {
		return s, fmt.Errorf("echo: %w", err)
	}
	return s, nil
}

// bulk streams updates for warmUp, then measures bytes read by the client
// and the proxy's CPU over sp.bulk.
func (r *rig) bulk(p path, sp spans, s *sample) error {
	id := fmt.Sprintf("bulk-%s-%d", p.name, time.Now().UnixNano())
	c, err := p.dial(id)
	if err != nil {
		return err
	}
	var n atomic.Int64
	errc := make(chan error, 1)
	go func() { errc <- c.Stream(&n) }()
	time.Sleep(sp.warmUp)
	n0, cpu0, self0, t0 := n.Load(), must(p.proc.CPU()), must(SelfCPU()), time.Now()
	time.Sleep(sp.bulk)
	n1, cpu1, self1, t1 := n.Load(), must(p.proc.CPU()), must(SelfCPU()), time.Now()
	select {
	case err := <-errc:
		_ = c.Close()
		return fmt.Errorf("the stream ended early: %w", err)
	default:
	}
	_ = c.Close()
	<-errc //nolint:errcheck // the stream ends with the close: its error says only that
	bytes := float64(n1 - n0)
	if bytes == 0 {
		return errors.New("no bytes in the measured span")
	}
	s.mbps = bytes / t1.Sub(t0).Seconds() / 1e6
	s.cpuPerGB = (cpu1 - cpu0).Seconds() / (bytes / 1e9)
	s.rigPerGB = (self1 - self0).Seconds() / (bytes / 1e9)
	if p.bridge {
		line, err := sessionLine(p.proc.Lines, id)
		if err != nil {
			return err
		}
		s.sessionOK = line
	}
	return nil
}

// roundTrips sends echoes one at a time: sp.echoes unmeasured, then as many
// as fit in sp.echo.
func (r *rig) roundTrips(p path, sp spans, s *sample) error {
	c, err := p.dial(fmt.Sprintf("echo-%s-%d", p.name, time.Now().UnixNano()))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	msg, reply := make([]byte, 0, EchoLen), make([]byte, EchoLen)
	var seq uint64
	for range sp.echoes {
		seq++
		if _, err := c.Echo(seq, msg, reply); err != nil {
			return err
		}
	}
	var rtts []time.Duration
	start := time.Now()
	for time.Since(start) < sp.echo {
		seq++
		d, err := c.Echo(seq, msg, reply)
		if err != nil {
			return err
		}
		rtts = append(rtts, d)
	}
	elapsed := time.Since(start)
	slices.Sort(rtts)
	s.p50 = rtts[len(rtts)/2]
	s.p99 = rtts[min(len(rtts)-1, len(rtts)*99/100)]
	s.msgsPerS = float64(len(rtts)) / elapsed.Seconds()
	return nil
}

// sessionLine waits for the bridge's line about the session just closed
// and checks that the proxy framed the updates and the session ended as a
// client leaving does.
func sessionLine(lines <-chan string, id string) (string, error) {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l := <-lines:
			if !strings.Contains(l, "session="+id+" ") {
				continue // an earlier session's
			}
			if strings.Contains(l, " updates=0 ") || !strings.Contains(l, " code=1000 ") {
				return l, fmt.Errorf("the proxy framed no update or the session did not end normally: %s", l)
			}
			return l, nil
		case <-timeout:
			return "", fmt.Errorf("the bridge reported no end of session %s", id)
		}
	}
}

func must(d time.Duration, err error) time.Duration {
	if err != nil {
		panic(err)
	}
	return d
}

// summary is the medians of a path's samples.
type summary struct {
	mbps, cpuPerGB, rigPerGB, msgsPerS float64
	p50, p99                           time.Duration
}

func summarize(ss []sample) summary {
	return summary{
		mbps:     median(ss, func(s sample) float64 { return s.mbps }),
		cpuPerGB: median(ss, func(s sample) float64 { return s.cpuPerGB }),
		rigPerGB: median(ss, func(s sample) float64 { return s.rigPerGB }),
		msgsPerS: median(ss, func(s sample) float64 { return s.msgsPerS }),
		p50:      time.Duration(median(ss, func(s sample) float64 { return float64(s.p50) })),
		p99:      time.Duration(median(ss, func(s sample) float64 { return float64(s.p99) })),
	}
}

// pairedRatio is the median over rounds of x's figure over y's in the same
// round: both were measured within seconds of each other.
func pairedRatio(x, y []sample, f func(sample) float64) float64 {
	r := make([]sample, len(x))
	for i := range x {
		r[i].mbps = f(x[i]) / f(y[i])
	}
	return median(r, func(s sample) float64 { return s.mbps })
}

func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// report writes the table, the ratios and the goals to w.
func (r *rig) report(w io.Writer, res map[string][]sample, sp spans) map[string]float64 {
	fmt.Fprintf(w, "\nVNC relay paths, medians of %d rounds (bulk %s per session, round trips for %s):\n\n", sp.rounds, sp.bulk, sp.echo)
	fmt.Fprintln(w, "| path | bulk MB/s | proxy CPU s/GB | rig CPU s/GB | 100 B round trip p50 µs | p99 µs | msgs/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, p := range r.paths {
		s := summarize(res[p.name])
		fmt.Fprintf(w, "| (%s) %s | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f |\n", p.name, p.label, s.mbps, s.cpuPerGB,
			s.rigPerGB, float64(s.p50)/1e3, float64(s.p99)/1e3, s.msgsPerS)
	}
	fmt.Fprintln(w, "\nrig CPU: the benchmark's own process (source, client and, on (c) and (d), the upstream stand-in).")
	mbps := func(s sample) float64 { return s.mbps }
	cpu := func(s sample) float64 { return s.cpuPerGB }
	p50 := func(s sample) float64 { return float64(s.p50) }
	p99 := func(s sample) float64 { return float64(s.p99) }
	ratios := map[string]float64{}
	fmt.Fprintln(w, "\nRatios (median over rounds of the same round's ratio):")
	fmt.Fprintln(w, "\n| path | bulk ÷ (a) | bulk ÷ (b) | p50 ÷ (b) | p99 ÷ (b) | CPU/GB ÷ (b) | CPU/GB ÷ (a) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, n := range []string{"b", "c", "d", "e"} {
		x := res[n]
		row := []float64{
			pairedRatio(x, res["a"], mbps), pairedRatio(x, res["b"], mbps),
			pairedRatio(x, res["b"], p50), pairedRatio(x, res["b"], p99),
			pairedRatio(x, res["b"], cpu), pairedRatio(x, res["a"], cpu),
		}
		for i, k := range []string{"bulk/a", "bulk/b", "p50/b", "p99/b", "cpu/b", "cpu/a"} {
			ratios[n+"-"+k] = row[i]
		}
		fmt.Fprintf(w, "| (%s) | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", n, row[0], row[1], row[2], row[3], row[4], row[5])
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintln(w, "\nGoals for (c):")
	fmt.Fprintf(w, "- bulk >= 0.8x (a): %.2f, %s\n", ratios["c-bulk/a"], met(ratios["c-bulk/a"] >= 0.8))
	fmt.Fprintf(w, "- 100 B round trip p50 <= (b)'s: %.2f, %s\n", ratios["c-p50/b"], met(ratios["c-p50/b"] <= 1))
	fmt.Fprintf(w, "- 100 B round trip p99 <= (b)'s: %.2f, %s\n", ratios["c-p99/b"], met(ratios["c-p99/b"] <= 1))
	fmt.Fprintf(w, "- CPU s/GB <= 0.5x (b): %.2f, %s\n", ratios["c-cpu/b"], met(ratios["c-cpu/b"] <= 0.5))
	fmt.Fprintln(w, "\nPer round (bulk MB/s, CPU s/GB, p50 µs, p99 µs):")
	for _, p := range r.paths {
		fmt.Fprintf(w, "- (%s)", p.name)
		for _, s := range res[p.name] {
			fmt.Fprintf(w, " [%.0f %.2f %.0f %.0f]", s.mbps, s.cpuPerGB, float64(s.p50)/1e3, float64(s.p99)/1e3)
		}
		fmt.Fprintln(w)
	}
	for _, n := range []string{"c", "d"} {
		if ss := res[n]; len(ss) > 0 {
			fmt.Fprintf(w, "- (%s) last bulk session, as the bridge saw it: %s\n", n, ss[len(ss)-1].sessionOK)
		}
	}
	return ratios
}
