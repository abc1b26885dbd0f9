package validate

import (
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/virtstation/virtstation/policy"
)

// enforce applies the active modes (nil: every rule denies) to d. It tells
// report (and the log) about each violation of a rule in dryrun mode, and
// returns the violations that deny and the admission warnings.
func enforce(log logr.Logger, active *atomic.Pointer[policy.Modes], report func(policy.Violation), d policy.Decision) (deny []policy.Violation, warnings []string) {
	modes := policy.Modes{}
	if m := active.Load(); m != nil {
		modes = *m
	}
	deny, warn, observed := modes.Apply(d)
	for _, v := range observed {
		log.Info("policy violation in dryrun mode", "rule", v.ID, "field", v.Field, "message", v.Message)
		if report != nil {
			report(v)
		}
	}
	return deny, ViolationWarnings(warn)
}
