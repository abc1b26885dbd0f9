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
// A claim is released when Live says it lapsed: its VM does not exist, or
// exists but no longer attaches the disk, no VMI uses the disk, and the
// claim is at least grace old (from s.ClaimedAt; a claim without a readable
// claimed-at is old). A younger claim is kept, and RecheckAfter says when
// to look again: its VM's create or update may still be in flight.
func Decide(s State, facts map[string]Facts, inUse bool, now time.Time, grace time.Duration) Decision {
	var d Decision
	for _, vm := range s.Holders() {
		l := Live(facts[vm], inUse, s.ClaimedAt, now, grace)
		switch l.Reason {
		case Lapsed:
			d.Release = append(d.Release, vm)
		case Young:
			if d.RecheckAfter == 0 || l.Remaining < d.RecheckAfter {
				d.RecheckAfter = l.Remaining
			}
		}
	}
	return d
}
