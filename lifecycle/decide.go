package lifecycle

import (
	"time"

	"github.com/virtstation/virtstation/api"
)

// Observation is what the Controller knows of one VM at one moment.
type Observation struct {
	Now    time.Time
	Policy api.LifecyclePolicy
	// Running: the VMI is Running and the VM is not being stopped.
	Running bool
	// Since is when the VMI began running: a VM that has just started is
	// not idle, however old its last activity.
	Since time.Time
	// LastActivity is the newest activity from any source, and Source says
	// which.
	LastActivity time.Time
	Source       string
	// KeepRunningUntil is the newest keep-running lease, capped.
	KeepRunningUntil time.Time
	// StopAt is the notice given: when the stop is due (zero: none).
	StopAt time.Time
	// Recorded is the last record's LastActivity and Action: nothing is
	// recorded twice for one idle period.
	Recorded       string
	RecordedAction string
	// DataLoss, when not empty, says why a stop would lose data.
	DataLoss string
}

// Action is what the Controller should do.
type Action int

// Actions.
const (
	// Wait: nothing now; look again at Decision.Next (zero: only when
	// something changes).
	Wait Action = iota
	// Withdraw takes back a notice: activity, a lease, or the VM stopped.
	Withdraw
	// Notice starts the grace period, ending at Decision.StopAt.
	Notice
	// Stop stops the VM (observe mode: records that it would).
	Stop
	// Skip records that a due stop was not made because it would lose data.
	Skip
)

var actionNames = [...]string{"wait", "withdraw", "notice", "stop", "skip"}

func (a Action) String() string { return actionNames[a] }

// Decision is Decide's answer.
type Decision struct {
	Action Action
	// StopAt is the due time of a Notice.
	StopAt time.Time
	// Next is when to look again; zero when only a change can matter.
	Next time.Time
	// Idle is when the VM became (or becomes) idle.
	Idle time.Time
}

// Decide is the idle-stop state machine:
//
//	Running ── activity ──────────────────────────────► Running
//	   └─ idle-timeout without activity ─► Notice (StopAt = now + grace)
//	        ├─ activity or a lease before StopAt ─► Withdraw ─► Running
//	        └─ StopAt reached ─► Stop (Skip if it would lose data)
//
// A VM that is not running, or whose policy is off, has no notice.
func Decide(o Observation) Decision {
	if !o.Policy.Enabled() || !o.Running {
		return withdrawn(o, Decision{})
	}
	last := latest(o.LastActivity, o.Since)
	idle := last.Add(o.Policy.IdleTimeout)
	if o.KeepRunningUntil.After(o.Now) {
		return withdrawn(o, Decision{Next: latest(o.KeepRunningUntil, idle), Idle: latest(o.KeepRunningUntil, idle)})
	}
	if o.Now.Before(idle) {
		return withdrawn(o, Decision{Next: idle, Idle: idle})
	}
	if recordedFor(o, last) {
		// This idle period's would-stop or skip is on record: only new
		// activity (a change) can matter.
		return Decision{Idle: idle}
	}
	if o.StopAt.IsZero() {
		at := o.Now.Add(o.Policy.IdleGracePeriod)
		return Decision{Action: Notice, StopAt: at, Next: at, Idle: idle}
	}
	if o.Now.Before(o.StopAt) {
		return Decision{Next: o.StopAt, Idle: idle}
	}
	if o.DataLoss != "" && !o.Policy.StopUnsafe {
		return Decision{Action: Skip, Idle: idle}
	}
	return Decision{Action: Stop, Idle: idle}
}

// withdrawn is d, withdrawing a notice that o has.
func withdrawn(o Observation, d Decision) Decision {
	if !o.StopAt.IsZero() {
		d.Action = Withdraw
	}
	return d
}

// recordedFor says whether the last record is of the idle period that began
// at last: a stop (a VM whose stop KubeVirt has accepted but not yet carried
// out is not stopped again), a would-stop or a skip.
func recordedFor(o Observation, last time.Time) bool {
	return o.RecordedAction != "" && o.Recorded == formatTime(last)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// formatTime is how the lifecycle writes times: RFC 3339 in UTC.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
