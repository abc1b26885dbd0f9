package activity

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// step is one call of TestThrottle: input (admit), seen, wrote or expire
// at t0+at.
type step struct {
	op   string
	vm   types.NamespacedName
	at   time.Duration
	mark time.Duration // seen: the admission it answers
	seen time.Duration // seen: the Lease's renewTime
	want admission     // admit only
}

// TestThrottle drives the throttle through input sequences on a fake
// clock: one write per VM per interval, however much input, and another
// replica's write postpones this one's.
func TestThrottle(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	const interval = time.Minute
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	b := types.NamespacedName{Namespace: "team", Name: "b"}
	for name, tc := range map[string]struct {
		max   int
		steps []step
	}{
		"continuous input is admitted once an interval": {max: 10, steps: []step{
			{op: "admit", vm: a, at: 0, want: admitted},
			{op: "admit", vm: a, at: time.Second, want: throttled},
			{op: "admit", vm: a, at: 59 * time.Second, want: throttled},
			{op: "admit", vm: a, at: 60 * time.Second, want: admitted},
			{op: "admit", vm: a, at: 119 * time.Second, want: throttled},
			{op: "admit", vm: a, at: 120 * time.Second, want: admitted},
		}},
		"VMs are throttled apart": {max: 10, steps: []step{
			{op: "admit", vm: a, at: 0, want: admitted},
			{op: "admit", vm: b, at: time.Second, want: admitted},
			{op: "admit", vm: a, at: 2 * time.Second, want: throttled},
		}},
		"another replica's write moves the next one earlier": {max: 10, steps: []step{
			{op: "admit", vm: a, at: 50 * time.Second, want: admitted},
			// The Lease says another replica wrote at 20 s.
			{op: "seen", vm: a, at: 50 * time.Second, mark: 50 * time.Second, seen: 20 * time.Second},
			{op: "admit", vm: a, at: 79 * time.Second, want: throttled},
			{op: "admit", vm: a, at: 80 * time.Second, want: admitted},
		}},
		"a renewTime in the future counts as the admission": {max: 10, steps: []step{
			{op: "admit", vm: a, at: 0, want: admitted},
			{op: "seen", vm: a, at: 0, mark: 0, seen: 30 * time.Minute},
			{op: "admit", vm: a, at: 59 * time.Second, want: throttled},
			{op: "admit", vm: a, at: 60 * time.Second, want: admitted},
		}},
		"a late answer leaves a newer admission alone": {max: 10, steps: []step{
			{op: "admit", vm: a, at: 0, want: admitted},
			{op: "admit", vm: a, at: 61 * time.Second, want: admitted},
			{op: "seen", vm: a, at: 62 * time.Second, mark: 0, seen: -30 * time.Second},
			{op: "admit", vm: a, at: 100 * time.Second, want: throttled},
		}},
		"a keep-running write throttles input after it": {max: 10, steps: []step{
			{op: "wrote", vm: a, at: 10 * time.Second},
			{op: "admit", vm: a, at: 69 * time.Second, want: throttled},
			{op: "admit", vm: a, at: 70 * time.Second, want: admitted},
		}},
		"at the cap new VMs are dropped until entries expire": {max: 1, steps: []step{
			{op: "admit", vm: a, at: 0, want: admitted},
			{op: "admit", vm: b, at: time.Second, want: full},
			{op: "expire", at: 30 * time.Second},
			{op: "admit", vm: b, at: 31 * time.Second, want: full},
			{op: "expire", at: 60 * time.Second},
			{op: "admit", vm: b, at: 61 * time.Second, want: admitted},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			th := newThrottle(interval, tc.max)
			for i, s := range tc.steps {
				switch s.op {
				case "admit":
					if got, _ := th.admit(s.vm, t0.Add(s.at)); got != s.want {
						t.Fatalf("step %d: input to %s at %v: %v, want %v", i, s.vm, s.at, got, s.want)
					}
				case "seen":
					th.seen(s.vm, t0.Add(s.mark), t0.Add(s.seen))
				case "wrote":
					th.wrote(s.vm, t0.Add(s.at))
				case "expire":
					th.expire(t0.Add(s.at))
				}
			}
		})
	}
}

// TestThrottleUndo: a write that could not be queued is given back, so the
// next input tries again at once.
func TestThrottleUndo(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	th := newThrottle(time.Minute, 10)
	if got, prev := th.admit(a, t0); got != admitted || !prev.IsZero() {
		t.Fatalf("first input: %v, %v", got, prev)
	}
	later := t0.Add(2 * time.Minute)
	got, prev := th.admit(a, later)
	if got != admitted || !prev.Equal(t0) {
		t.Fatalf("input after the interval: %v, prev %v", got, prev)
	}
	th.undo(a, later, prev)
	if got, _ := th.admit(a, later.Add(time.Second)); got != admitted {
		t.Fatalf("input after an undo: %v, want admitted", got)
	}
	// An undo of a VM never tracked before forgets it: it takes no room.
	b := types.NamespacedName{Namespace: "team", Name: "b"}
	_, prev = th.admit(b, t0)
	th.undo(b, t0, prev)
	if len(th.last) != 1 {
		t.Fatalf("%d VMs tracked after undoing b, want 1", len(th.last))
	}
}
