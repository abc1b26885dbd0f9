package claims

import (
	"testing"
	"time"
)

func TestLive(t *testing.T) {
	const grace = 2 * time.Minute
	old, young := t0.Add(-time.Hour), t0.Add(-30*time.Second)
	attached := Facts{Exists: true, Attaches: true}
	detached := Facts{Exists: true}
	tests := map[string]struct {
		facts     Facts
		inUse     bool
		claimedAt time.Time
		want      Liveness
	}{
		"VM gone, old claim: lapsed":            {claimedAt: old},
		"VM gone, no claimed-at: counts as old": {},
		"VM gone, exactly grace old: lapsed":    {claimedAt: t0.Add(-grace)},
		"VM gone, young claim: holds for the rest of the grace": {
			claimedAt: young, want: Liveness{Reason: Young, Remaining: 90 * time.Second},
		},
		"VM gone, claimed-at in the future: one grace at most": {
			claimedAt: t0.Add(time.Hour), want: Liveness{Reason: Young, Remaining: grace},
		},
		"VM attaches the disk, old claim: holds": {facts: attached, claimedAt: old, want: Liveness{Reason: Attached}},
		"VM attaches the disk, young claim: held by the VM, not the clock": {
			facts: attached, claimedAt: young, want: Liveness{Reason: Attached},
		},
		"VM exists but detached the disk, old claim: lapsed": {facts: detached, claimedAt: old},
		"VM exists but does not attach the disk yet, young claim: holds": {
			facts: detached, claimedAt: young, want: Liveness{Reason: Young, Remaining: 90 * time.Second},
		},
		"VM gone, a VMI uses the disk: holds": {inUse: true, claimedAt: old, want: Liveness{Reason: InUse}},
		"VM detached, a VMI uses the disk: holds": {
			facts: detached, inUse: true, claimedAt: old, want: Liveness{Reason: InUse},
		},
		"VM attaches and a VMI uses the disk: the VM is the reason": {
			facts: attached, inUse: true, want: Liveness{Reason: Attached},
		},
		"attaches without existing (impossible facts): lapsed": {facts: Facts{Attaches: true}, claimedAt: old},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Live(tc.facts, tc.inUse, tc.claimedAt, t0, grace)
			if got != tc.want {
				t.Errorf("Live(%+v, inUse=%v, %s) = %+v (%s), want %+v (%s)", tc.facts, tc.inUse, tc.claimedAt, got, got.Reason, tc.want, tc.want.Reason)
			}
			if got.Holds() != (tc.want.Reason != Lapsed) {
				t.Errorf("Holds() = %v for %s", got.Holds(), got.Reason)
			}
		})
	}
}
