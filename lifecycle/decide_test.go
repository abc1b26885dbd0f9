package lifecycle

import (
	"testing"
	"time"

	"github.com/virtstation/virtstation/api"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	policy := api.LifecyclePolicy{Mode: api.ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: 10 * time.Minute, MaxKeepRunning: 8 * time.Hour}
	base := func(now time.Time, last time.Time) Observation {
		return Observation{Now: now, Policy: policy, Running: true, Since: t0, LastActivity: last}
	}
	tests := []struct {
		name   string
		o      Observation
		action Action
		stopAt time.Time
		next   time.Time
	}{
		{"active VM waits until it would be idle", base(t0.Add(30*time.Minute), t0.Add(20*time.Minute)), Wait, time.Time{}, t0.Add(80 * time.Minute)},
		{"just started: idle counts from the start", base(t0.Add(30*time.Minute), t0.Add(-5*time.Hour)), Wait, time.Time{}, t0.Add(time.Hour)},
		{"idle: notice, stop due after the grace period", base(t0.Add(2*time.Hour), t0), Notice, t0.Add(130 * time.Minute), t0.Add(130 * time.Minute)},
		{"notice given: wait for it", with(base(t0.Add(125*time.Minute), t0), func(o *Observation) { o.StopAt = t0.Add(130 * time.Minute) }), Wait, time.Time{}, t0.Add(130 * time.Minute)},
		{"grace over: stop", with(base(t0.Add(131*time.Minute), t0), func(o *Observation) { o.StopAt = t0.Add(130 * time.Minute) }), Stop, time.Time{}, time.Time{}},
		{"activity during the grace period withdraws", with(base(t0.Add(125*time.Minute), t0.Add(124*time.Minute)), func(o *Observation) { o.StopAt = t0.Add(130 * time.Minute) }), Withdraw, time.Time{}, t0.Add(184 * time.Minute)},
		{"lease keeps it running", with(base(t0.Add(2*time.Hour), t0), func(o *Observation) { o.KeepRunningUntil = t0.Add(5 * time.Hour) }), Wait, time.Time{}, t0.Add(5 * time.Hour)},
		{"lease taken during the grace period withdraws", with(base(t0.Add(125*time.Minute), t0), func(o *Observation) {
			o.StopAt = t0.Add(130 * time.Minute)
			o.KeepRunningUntil = t0.Add(5 * time.Hour)
		}), Withdraw, time.Time{}, t0.Add(5 * time.Hour)},
		{"lease over: notice at once", with(base(t0.Add(5*time.Hour), t0), func(o *Observation) { o.KeepRunningUntil = t0.Add(5 * time.Hour) }), Notice, t0.Add(5*time.Hour + 10*time.Minute), t0.Add(5*time.Hour + 10*time.Minute)},
		{"would lose data: skip", with(base(t0.Add(131*time.Minute), t0), func(o *Observation) {
			o.StopAt = t0.Add(130 * time.Minute)
			o.DataLoss = "volume \"root\" is a writable containerDisk"
		}), Skip, time.Time{}, time.Time{}},
		{"would lose data, opted in: stop", with(base(t0.Add(131*time.Minute), t0), func(o *Observation) {
			o.StopAt = t0.Add(130 * time.Minute)
			o.DataLoss = "volume \"root\" is a writable containerDisk"
			o.Policy.StopUnsafe = true
		}), Stop, time.Time{}, time.Time{}},
		{"skip on record for this idle period: nothing", with(base(t0.Add(3*time.Hour), t0), func(o *Observation) {
			o.StopAt = t0.Add(130 * time.Minute)
			o.Recorded, o.RecordedAction = formatTime(t0), api.IdleActionSkipped
		}), Wait, time.Time{}, time.Time{}},
		{"stop on record for this idle period, VMI still running: nothing", with(base(t0.Add(3*time.Hour), t0), func(o *Observation) {
			o.Recorded, o.RecordedAction = formatTime(t0), api.IdleActionStopped
		}), Wait, time.Time{}, time.Time{}},
		{"would-stop on record of an older idle period: notice again", with(base(t0.Add(5*time.Hour), t0.Add(3*time.Hour)), func(o *Observation) {
			o.Recorded, o.RecordedAction = formatTime(t0), api.IdleActionWouldStop
		}), Notice, t0.Add(5*time.Hour + 10*time.Minute), t0.Add(5*time.Hour + 10*time.Minute)},
		{"stopped VM with a notice: withdraw", with(base(t0.Add(3*time.Hour), t0), func(o *Observation) {
			o.Running = false
			o.StopAt = t0.Add(130 * time.Minute)
		}), Withdraw, time.Time{}, time.Time{}},
		{"policy off: nothing", with(base(t0.Add(3*time.Hour), t0), func(o *Observation) { o.Policy.Mode = api.ModeOff }), Wait, time.Time{}, time.Time{}},
		{"no idle timeout: nothing", with(base(t0.Add(3*time.Hour), t0), func(o *Observation) { o.Policy.IdleTimeout = 0 }), Wait, time.Time{}, time.Time{}},
		{"zero grace: stop due at once", with(base(t0.Add(2*time.Hour), t0), func(o *Observation) { o.Policy.IdleGracePeriod = 0 }), Notice, t0.Add(2 * time.Hour), t0.Add(2 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.o)
			if d.Action != tt.action || !d.StopAt.Equal(tt.stopAt) || !d.Next.Equal(tt.next) {
				t.Errorf("Decide = %s stopAt %s next %s; want %s stopAt %s next %s",
					d.Action, formatTime(d.StopAt), formatTime(d.Next), tt.action, formatTime(tt.stopAt), formatTime(tt.next))
			}
		})
	}
}

func with(o Observation, f func(*Observation)) Observation {
	f(&o)
	return o
}
