package relay

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// benchSpans keep the whole comparison near 90 s: 5 rounds of 4 paths, each
// about 0.5 s warm-up, 2 s bulk and 1.2 s of round trips, plus sessions'
// set-up and the build.
var benchSpans = spans{rounds: 5, warmUp: 500 * time.Millisecond, bulk: 2 * time.Second, echoes: 200, echo: time.Second}

// BenchmarkVNCRelay measures the four VNC relay paths side by side, in
// rounds that take each path in turn, and prints the medians, the ratios
// and issue 8's goals for the bridge's path. One op is the whole
// comparison: run it with -benchtime 1x. See docs/benchmarks.md.
func BenchmarkVNCRelay(b *testing.B) {
	r := startRig(b)
	for range b.N {
		res := r.compare(b, benchSpans)
		ratios := r.report(os.Stdout, res, benchSpans)
		for _, k := range []string{"c-bulk/a", "c-p50/b", "c-p99/b", "c-cpu/b", "d-bulk/a", "d-p50/b", "d-p99/b", "d-cpu/b"} {
			b.ReportMetric(ratios[k], k)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// TestVNCRelayPaths runs the comparison once at a tiny size, so the
// benchmark cannot rot: every path carries whole updates and echoes, and
// the bridge's proxy frames the updates. It asserts no speed.
func TestVNCRelayPaths(t *testing.T) {
	if _, err := exec.LookPath("websockify"); err != nil {
		t.Fatal("websockify is not installed; make test-deps installs it")
	}
	r := startRig(t)
	res := r.compare(t, spans{rounds: 1, warmUp: 50 * time.Millisecond, bulk: 100 * time.Millisecond, echoes: 5, echo: 20 * time.Millisecond})
	for _, p := range r.paths {
		if len(res[p.name]) != 1 {
			t.Fatalf("path %s: %d samples", p.name, len(res[p.name]))
		}
	}
	if testing.Verbose() {
		r.report(os.Stdout, res, spans{rounds: 1})
	}
}
