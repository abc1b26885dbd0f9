package validate

import (
	"reflect"
	"testing"
	"time"

	"github.com/virtstation/virtstation/claims"
)

func TestJudgeDisk(t *testing.T) {
	const grace = time.Minute
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old, young := now.Add(-time.Hour), now.Add(-10*time.Second)
	attached := claims.Facts{Exists: true, Attaches: true}
	detached := claims.Facts{Exists: true}
	pvc := func(c claims.State, claimants map[string]claims.Facts, usedBy ...string) DiskFacts {
		return DiskFacts{Kind: "PersistentVolumeClaim", Labelled: true, Claims: c, Claimants: claimants, UsedBy: usedBy}
	}
	base := DiskState{Exists: true, Labelled: true, Kind: "PersistentVolumeClaim"}
	with := func(f func(*DiskState)) DiskState { s := base; f(&s); return s }
	tests := map[string]struct {
		facts      DiskFacts
		wantState  DiskState
		wantLapsed []string
	}{
		"no such disk":   {wantState: DiskState{}},
		"unlabelled PVC": {facts: DiskFacts{Kind: "PersistentVolumeClaim"}, wantState: DiskState{Exists: true, Kind: "PersistentVolumeClaim"}},
		"free disk":      {facts: pvc(claims.State{}, nil), wantState: base},
		"writer attaches it": {
			facts:     pvc(claims.State{ClaimedBy: "ns/w", ClaimedAt: old}, map[string]claims.Facts{"ns/w": attached}),
			wantState: with(func(s *DiskState) { s.ClaimedBy, s.ClaimLive = "ns/w", true }),
		},
		"writer exists but detached it, old claim: lapsed and replaced": {
			facts:      pvc(claims.State{ClaimedBy: "ns/w", ClaimedAt: old}, map[string]claims.Facts{"ns/w": detached}),
			wantState:  with(func(s *DiskState) { s.ClaimedBy = "ns/w" }),
			wantLapsed: []string{"ns/w"},
		},
		"writer not created yet, young claim: holds": {
			facts:     pvc(claims.State{ClaimedBy: "ns/w", ClaimedAt: young}, nil),
			wantState: with(func(s *DiskState) { s.ClaimedBy, s.ClaimLive = "ns/w", true }),
		},
		"writer gone, a VMI uses the disk: holds": {
			facts:     pvc(claims.State{ClaimedBy: "ns/w", ClaimedAt: old}, nil, "ns/runner"),
			wantState: with(func(s *DiskState) { s.ClaimedBy, s.ClaimLive, s.UsedBy = "ns/w", true, []string{"ns/runner"} }),
		},
		"own claim is not another's": {
			facts:     pvc(claims.State{ClaimedBy: "ns/me", SharedBy: []string{"ns/me"}, ClaimedAt: old}, nil),
			wantState: base,
		},
		"readers judged one by one": {
			facts: pvc(claims.State{SharedBy: []string{"ns/gone", "ns/me", "ns/r"}, ClaimedAt: old},
				map[string]claims.Facts{"ns/r": attached}),
			wantState:  with(func(s *DiskState) { s.SharedBy = []string{"ns/r"} }),
			wantLapsed: []string{"ns/gone"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st, lapsed := JudgeDisk(tc.facts, "ns/me", now, grace)
			if !reflect.DeepEqual(st, tc.wantState) {
				t.Errorf("state = %+v, want %+v", st, tc.wantState)
			}
			if !reflect.DeepEqual(lapsed, tc.wantLapsed) {
				t.Errorf("lapsed = %q, want %q", lapsed, tc.wantLapsed)
			}
		})
	}
}
