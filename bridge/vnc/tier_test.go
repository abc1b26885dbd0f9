package vnc

import (
	"testing"
	"time"
)

func TestControllerDropsAtOnceAndRecoversSlowly(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	win := func(latency time.Duration) Window { return Window{Updates: 5, Latency: latency} }
	steps := []struct {
		at   int
		w    Window
		want Tier
	}{
		{0, win(20 * time.Millisecond), Good},
		{500, win(500 * time.Millisecond), Poor}, // straight to Poor under heavy pressure
		{1000, win(30 * time.Millisecond), Poor}, // headroom starts
		{2000, win(30 * time.Millisecond), Poor},
		{3000, win(30 * time.Millisecond), Poor},
		{4000, win(30 * time.Millisecond), Fair},  // 3 s of headroom: one tier up
		{4500, Window{}, Fair},                    // an idle screen changes nothing
		{5000, win(100 * time.Millisecond), Fair}, // under fair's threshold but without margin: no headroom
		{8500, win(100 * time.Millisecond), Fair},
		{9000, win(200 * time.Millisecond), Fair},
		{9500, win(50 * time.Millisecond), Fair}, // headroom run restarts
		{12400, win(50 * time.Millisecond), Fair},
		{12500, win(50 * time.Millisecond), Good},
		{13000, Window{Pending: time.Second}, Poor}, // nothing completes: pending requests count
	}
	var c Controller
	for _, s := range steps {
		if got := c.Observe(s.w, at(s.at)); got != s.want {
			t.Fatalf("at %d ms, window %+v: tier %v, want %v", s.at, s.w, got, s.want)
		}
	}
}

func TestTierFor(t *testing.T) {
	cases := map[time.Duration]Tier{
		0: Good, fairLatency - 1: Good, fairLatency: Fair, poorLatency - 1: Fair, poorLatency: Poor, time.Hour: Poor,
	}
	for latency, want := range cases {
		if got := tierFor(latency); got != want {
			t.Errorf("tierFor(%v) = %v, want %v", latency, got, want)
		}
	}
}

func TestControllerWaitsLongerAfterEachRelapse(t *testing.T) {
	t0 := time.Unix(0, 0)
	var c Controller
	now := t0
	step := func(latency time.Duration, d time.Duration) Tier {
		now = now.Add(d)
		return c.Observe(Window{Updates: 3, Latency: latency}, now)
	}
	// A link that copes only at Fair's compression: Good overloads it.
	step(300*time.Millisecond, 0) // Fair
	recoveries := []time.Duration{}
	var since time.Time
	for i := 0; i < 200; i++ {
		if c.Tier() == Good {
			step(300*time.Millisecond, 500*time.Millisecond) // relapse at once
		} else {
			if since.IsZero() {
				since = now
			}
			if step(40*time.Millisecond, 500*time.Millisecond) == Good {
				recoveries = append(recoveries, now.Sub(since))
				since = time.Time{}
			}
		}
	}
	if len(recoveries) < 3 {
		t.Fatalf("recoveries = %v", recoveries)
	}
	for i := 1; i < len(recoveries); i++ {
		if recoveries[i] < recoveries[i-1] || recoveries[i] > maxRecoverAfter+time.Second {
			t.Fatalf("recovery waits %v: want non-decreasing, capped at %v", recoveries, maxRecoverAfter)
		}
	}
	if recoveries[2] < 2*recoveries[0] {
		t.Fatalf("recovery waits %v: want the wait to double after relapses", recoveries)
	}
}
