package claims

import "time"

// Reason says why a claim still holds, or that it lapsed.
type Reason int

// Reasons, in the order Live tries them.
const (
	// Lapsed: nothing keeps the claim; it may be released or replaced.
	Lapsed Reason = iota
	// Attached: the claimant VM exists and attaches the disk.
	Attached
	// InUse: a VirtualMachineInstance has a volume backed by the disk.
	InUse
	// Young: the claim is younger than the grace period; its VM's create
	// or update may still be in flight.
	Young
)

// String names the reason, for logs and test failures.
func (r Reason) String() string {
	switch r {
	case Attached:
		return "attached"
	case InUse:
		return "in use"
	case Young:
		return "young"
	}
	return "lapsed"
}

// Liveness is Live's verdict on one claim.
type Liveness struct {
	// Reason is why the claim holds; Lapsed when it does not.
	Reason Reason
	// Remaining, for Reason Young, is how long until the grace runs out
	// (at most the grace itself).
	Remaining time.Duration
}

// Holds reports whether the claim still counts.
func (l Liveness) Holds() bool { return l.Reason != Lapsed }

// Live decides whether one claim still holds. It is the one rule every
// part of Virtstation judges claims by: the validating webhook's snapshot
// (a lapsed claim does not stand in a VM's way, and is replaced when the VM
// claims the disk), the DeletionGuard (a claim that holds blocks deletion),
// the Releaser (a lapsed claim is released) and `virtstation render`.
//
// f is what is known about the claimant VM (the zero Facts for a VM that
// does not exist), inUse whether a VirtualMachineInstance has a volume
// backed by the disk, claimedAt the disk's claimed-at (zero when absent or
// unreadable: the claim counts as old).
//
// A claim holds while its VM exists and attaches the disk; else while a VMI
// uses the disk; else while it is younger than grace. A claimed-at in the
// future (skewed clocks) holds for one grace from now, not until then.
func Live(f Facts, inUse bool, claimedAt, now time.Time, grace time.Duration) Liveness {
	switch {
	case f.Exists && f.Attaches:
		return Liveness{Reason: Attached}
	case inUse:
		return Liveness{Reason: InUse}
	}
	if wait := remainingGrace(claimedAt, now, grace); wait > 0 {
		return Liveness{Reason: Young, Remaining: wait}
	}
	return Liveness{}
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
