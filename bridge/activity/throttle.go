package activity

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// admission is what the throttle makes of one input.
type admission int

const (
	// throttled: a write for the VM was handed over, or seen, within the
	// interval; the input changes nothing.
	throttled admission = iota
	// admitted: hand a write over; the throttle counts it as done.
	admitted
	// full: the throttle tracks as many VMs as it may; the input is
	// dropped.
	full
)

// throttle remembers, per VM, when a write was last handed over or seen.
// It is a pure state machine: the caller passes the clock and serializes
// calls.
type throttle struct {
	interval time.Duration
	max      int
	last     map[types.NamespacedName]time.Time
}

func newThrottle(interval time.Duration, max int) *throttle {
	return &throttle{interval: interval, max: max, last: map[types.NamespacedName]time.Time{}}
}

// admit decides on input to vm at now. When it admits, prev is what to
// give back to undo the admission (zero: the VM was not tracked).
func (t *throttle) admit(vm types.NamespacedName, now time.Time) (a admission, prev time.Time) {
	prev, ok := t.last[vm]
	switch {
	case ok && now.Sub(prev) < t.interval:
		return throttled, prev
	case !ok && len(t.last) >= t.max:
		return full, prev
	}
	t.last[vm] = now
	return admitted, prev
}

// undo gives back the admission of vm at mark, whose write could not be
// queued, so that the next input tries again; prev is what admit
// returned. A newer mark is left alone.
func (t *throttle) undo(vm types.NamespacedName, mark, prev time.Time) {
	if cur, ok := t.last[vm]; !ok || !cur.Equal(mark) {
		return
	}
	if prev.IsZero() {
		delete(t.last, vm)
		return
	}
	t.last[vm] = prev
}

// seen records that the write admitted at mark found vm's Lease written
// at at, within the interval, by another replica: this replica's next
// write is due an interval after at, not after mark. An at in the future
// (clock skew) counts as mark. A newer mark is left alone.
func (t *throttle) seen(vm types.NamespacedName, mark, at time.Time) {
	if cur, ok := t.last[vm]; !ok || !cur.Equal(mark) {
		return
	}
	if at.After(mark) {
		at = mark
	}
	t.last[vm] = at
}

// wrote records a write of vm's Lease at at made outside the throttle (a
// keep-running lease): input within the interval after it is throttled.
func (t *throttle) wrote(vm types.NamespacedName, at time.Time) {
	cur, ok := t.last[vm]
	switch {
	case ok && cur.After(at):
	case ok || len(t.last) < t.max:
		t.last[vm] = at
	}
}

// expire forgets every VM whose mark is an interval old: it throttles
// nothing any more. It returns how many it forgot.
func (t *throttle) expire(now time.Time) int {
	n := 0
	for vm, at := range t.last {
		if now.Sub(at) >= t.interval {
			delete(t.last, vm)
			n++
		}
	}
	return n
}
