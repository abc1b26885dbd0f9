package vnc

import "time"

// Tier is how much the link to the client can take.
type Tier int

const (
	// Good: the client's own settings, requests forwarded as they come.
	Good Tier = iota
	// Fair: more compression, the best-compressing encoding first,
	// incremental updates at most ~15 per second.
	Fair
	// Poor: maximum compression, incremental updates at most ~5 per second.
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
	// Latency is the median time from a forwarded update request to its
	// update delivered to the client; zero when there was none.
	Latency time.Duration
	// Pending is how long the oldest request still unanswered has waited:
	// a link so slow that nothing completes shows here.
	Pending time.Duration
}

// Thresholds of request-to-update latency between tiers. A frame that takes
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
)

// Controller picks the tier from successive windows: it drops at once under
// pressure and recovers one tier after recoverAfter of headroom. It is a
// pure state machine; the caller feeds it windows and a clock.
type Controller struct {
	tier       Tier
	headroomAt time.Time // when the current run of headroom began; zero when none
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
	if want := tierFor(load); want > c.tier {
		c.tier, c.headroomAt = want, time.Time{}
		return c.tier
	}
	if c.tier == Good || !hasHeadroom(c.tier, load) {
		c.headroomAt = time.Time{}
		return c.tier
	}
	if c.headroomAt.IsZero() {
		c.headroomAt = now
	}
	if now.Sub(c.headroomAt) >= recoverAfter {
		c.tier--
		c.headroomAt = time.Time{}
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
