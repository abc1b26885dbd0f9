package vnc

import "time"

// Tier is how much the link to the client can take.
type Tier int

const (
	// Good keeps the client's own settings and forwards its requests as
	// they come.
	Good Tier = iota
	// Fair asks for more compression with the best-compressing encoding
	// first, and forwards at most ~15 incremental updates per second.
	Fair
	// Poor asks for maximum compression and forwards at most ~5
	// incremental updates per second.
	Poor
)

func (t Tier) String() string {
	switch t {
	case Good:
		return "good"
	case Fair:
		return "fair"
	case Poor:
		return "poor"
	}
	return "unknown"
}

// Window is what one measurement window saw.
type Window struct {
	// Updates is how many framebuffer updates were delivered to the client.
	Updates int
	// Latency is the median client reply time of the window: from an
	// update's last byte leaving the bridge to the client's next update
	// request. A client asks for the next update once it has the last, so
	// this is how long the bytes buffered between the bridge and the client
	// took to drain: the link's lag, which write times do not show (socket
	// buffers absorb them). Zero when the client did not reply.
	Latency time.Duration
	// Pending is how long the client has not replied to the last update
	// delivered: a link so slow that nothing completes shows here.
	Pending time.Duration
}

// Thresholds of client reply time between tiers. An update that takes
// longer than fairLatency to reach the client is visibly laggy; one past
// poorLatency makes the pointer feel detached.
const (
	fairLatency = 150 * time.Millisecond
	poorLatency = 400 * time.Millisecond
	// recoverMargin: to recover, latency must sit well below the threshold
	// of the better tier, so a link at the edge does not flap.
	recoverMargin = 2
)

// Hysteresis of tier changes.
const (
	// recoverAfter is how long a link must show headroom before the tier
	// improves by one.
	recoverAfter = 3 * time.Second
	// relapseWithin: a drop this soon after a recovery means the better
	// tier's settings were what the link could not take (its headroom came
	// from the worse tier's compression), so the next recovery waits twice
	// as long, up to maxRecoverAfter. A tier kept this long resets the wait.
	relapseWithin   = 10 * time.Second
	maxRecoverAfter = time.Minute
)

// Controller picks the tier from successive windows: it drops at once under
// pressure and recovers one tier after a run of headroom, recoverAfter at
// first and doubling after each relapse. It is a pure state machine; the
// caller feeds it windows and a clock.
type Controller struct {
	tier         Tier
	headroomAt   time.Time // when the current run of headroom began; zero when none
	recoveredAt  time.Time // when the tier last improved
	recoverDelay time.Duration
}

// Tier is the current tier.
func (c *Controller) Tier() Tier { return c.tier }

// Observe feeds one window ending at now and returns the tier to use.
func (c *Controller) Observe(w Window, now time.Time) Tier {
	load := max(w.Latency, w.Pending)
	measured := w.Updates > 0 || w.Pending > 0
	if !measured {
		// An idle screen says nothing about the link; keep the tier and
		// the headroom run as they are.
		return c.tier
	}
	if c.recoverDelay == 0 {
		c.recoverDelay = recoverAfter
	}
	if want := tierFor(load); want > c.tier {
		if !c.recoveredAt.IsZero() && now.Sub(c.recoveredAt) < relapseWithin {
			c.recoverDelay = min(2*c.recoverDelay, maxRecoverAfter)
		}
		c.tier, c.headroomAt = want, time.Time{}
		return c.tier
	}
	if !c.recoveredAt.IsZero() && now.Sub(c.recoveredAt) >= relapseWithin+c.recoverDelay {
		c.recoverDelay, c.recoveredAt = recoverAfter, time.Time{}
	}
	if c.tier == Good || !hasHeadroom(c.tier, load) {
		c.headroomAt = time.Time{}
		return c.tier
	}
	if c.headroomAt.IsZero() {
		c.headroomAt = now
	}
	if now.Sub(c.headroomAt) >= c.recoverDelay {
		c.tier--
		c.headroomAt, c.recoveredAt = time.Time{}, now
	}
	return c.tier
}

// tierFor is the tier a latency calls for.
func tierFor(latency time.Duration) Tier {
	switch {
	case latency >= poorLatency:
		return Poor
	case latency >= fairLatency:
		return Fair
	}
	return Good
}

// hasHeadroom says whether latency would comfortably fit the next better
// tier than t.
func hasHeadroom(t Tier, latency time.Duration) bool {
	limit := poorLatency
	if t == Fair {
		limit = fairLatency
	}
	return latency*recoverMargin < limit
}
