package validate

import (
	"time"

	"github.com/virtstation/virtstation/claims"
)

// DiskFacts is what was read about one disk for one VM's admission.
type DiskFacts struct {
	// Kind is DataVolume or PersistentVolumeClaim; "" when no disk of that
	// name exists.
	Kind string
	// Labelled: the disk carries virtstation.io/data-disk=true.
	Labelled bool
	// Claims are the disk's claim annotations.
	Claims claims.State
	// UsedBy are the VMIs ("<ns>/<name>"), other than the admitted VM's,
	// with a volume backed by the disk.
	UsedBy []string
	// Claimants holds what is known about each claim holder other than the
	// admitted VM; a holder missing from it is a VM that does not exist.
	Claimants map[string]claims.Facts
}

// JudgeDisk is the state the policies see for one disk when VM self
// ("<ns>/<name>") is admitted at now, and the holders whose claims lapsed
// (the claim write replaces them). Each claim is judged by claims.Live, a
// VMI other than self's using the disk counting as in use.
//
// It is pure, and the one place a DiskState is made: the webhook's
// Snapshotter and `virtstation render` both call it, so the two give the
// same verdict on the same facts.
func JudgeDisk(f DiskFacts, self string, now time.Time, grace time.Duration) (DiskState, []string) {
	st := DiskState{UsedBy: f.UsedBy}
	if f.Kind == "" {
		return st, nil
	}
	st.Exists, st.Kind, st.Labelled = true, f.Kind, f.Labelled
	inUse := len(f.UsedBy) > 0
	var lapsed []string
	live := func(holder string) bool {
		l := claims.Live(f.Claimants[holder], inUse, f.Claims.ClaimedAt, now, grace)
		if !l.Holds() {
			lapsed = append(lapsed, holder)
		}
		return l.Holds()
	}
	if c := f.Claims.ClaimedBy; c != "" && c != self {
		st.ClaimedBy, st.ClaimLive = c, live(c)
	}
	for _, reader := range f.Claims.SharedBy {
		if reader != self && reader != f.Claims.ClaimedBy && live(reader) {
			st.SharedBy = append(st.SharedBy, reader)
		}
	}
	return st, lapsed
}
