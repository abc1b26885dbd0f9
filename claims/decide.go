package claims

import "time"

// Facts is what the Releaser found out about one claimant VM.
type Facts struct {
	// Exists: the VM exists (read from the API server, not a cache).
	Exists bool
	// Attaches: the VM attaches the disk (see Attaches).
	Attaches bool
}

// Decision is what to do with a disk's claims.
type Decision struct {
	// Release are the claimants ("<ns>/<vm>") whose claims go.
	Release []string
	// RecheckAfter, when positive, is how long until a claim that is still
	// too young to judge has aged past the grace period.
	RecheckAfter time.Duration
}

// Decide says which claims in s to release. facts holds what is known about
// each holder; a holder missing from it is a VM that does not exist.
// inUse is true when a VirtualMachineInstance in the disk's namespace has a
// volume backed by the disk.
//
// A claim is released when its VM does not exist, or exists but no longer
// attaches the disk, provided no VMI uses the disk and the claim is at least
// grace old (from s.ClaimedAt; a claim without a readable claimed-at is
// old). A younger claim is kept, and RecheckAfter says when to look again:
// its VM's create or update may still be in flight.
func Decide(s State, facts map[string]Facts, inUse bool, now time.Time, grace time.Duration) Decision {
	var d Decision
	if inUse {
		return d // the VMI's deletion brings the disk back
	}
	for _, vm := range s.Holders() {
		if f := facts[vm]; f.Exists && f.Attaches {
			continue // the VM's deletion, or its update, brings the disk back
		}
		if wait := remainingGrace(s.ClaimedAt, now, grace); wait > 0 {
			d.RecheckAfter = wait
			continue
		}
		d.Release = append(d.Release, vm)
	}
	return d
}

// remainingGrace is how long a claim written at claimedAt still counts
// regardless of its VM, capped at grace (claimed-at in the future means
// skewed clocks; look again after grace rather than after the skew).
func remainingGrace(claimedAt, now time.Time, grace time.Duration) time.Duration {
	if claimedAt.IsZero() {
		return 0
	}
	return min(claimedAt.Add(grace).Sub(now), grace)
}
