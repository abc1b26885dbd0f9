package validate

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ModesConfigMapName is the ConfigMap, in the install namespace, whose data
// sets the enforcement mode per rule: key = rule id, value = deny, warn or
// dryrun. Rules it does not name are in deny mode.
const ModesConfigMapName = "virtstation-policy-config"

// Mode is how a rule's deny violations are enforced.
type Mode string

// Enforcement modes.
const (
	// ModeDeny denies the admission (the default).
	ModeDeny Mode = "deny"
	// ModeWarn admits it with an admission warning.
	ModeWarn Mode = "warn"
	// ModeDryRun admits it; the violation is only logged and counted.
	ModeDryRun Mode = "dryrun"
)

var supportedModes = []string{string(ModeDeny), string(ModeDryRun), string(ModeWarn)}

// Modes maps rule ids to their enforcement mode. The zero value puts every
// rule in deny mode.
type Modes map[string]Mode

// ParseModes reads the data of the modes ConfigMap. The error names each bad
// key or value.
func ParseModes(data map[string]string) (Modes, error) {
	if errs := validateModes(data, field.NewPath("data")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	m := make(Modes, len(data))
	for id, v := range data {
		m[id] = Mode(strings.TrimSpace(v))
	}
	return m, nil
}

// validateModes checks the modes ConfigMap's data; fld is the path of data.
func validateModes(data map[string]string, fld *field.Path) field.ErrorList {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		switch Mode(strings.TrimSpace(data[k])) {
		case ModeDeny, ModeWarn, ModeDryRun:
		default:
			errs = append(errs, field.NotSupported(fld.Key(k), data[k], supportedModes))
		}
	}
	return errs
}

// Mode returns the rule's mode; deny when unset.
func (m Modes) Mode(id string) Mode {
	if mode, ok := m[id]; ok {
		return mode
	}
	return ModeDeny
}

// Apply sorts a decision's violations by enforcement: deny violations go by
// their rule's mode, warn violations always warn. Each list keeps the
// decision's order.
func (m Modes) Apply(d Decision) (deny, warn, dryrun []Violation) {
	for _, v := range d.Deny {
		switch m.Mode(v.ID) {
		case ModeWarn:
			warn = append(warn, v)
		case ModeDryRun:
			dryrun = append(dryrun, v)
		default:
			deny = append(deny, v)
		}
	}
	warn = append(warn, d.Warn...)
	sortViolations(warn)
	return deny, warn, dryrun
}

// String lists the modes as id=mode, sorted; "all rules deny" when empty.
func (m Modes) String() string {
	if len(m) == 0 {
		return "all rules deny"
	}
	parts := make([]string, 0, len(m))
	for id, mode := range m {
		parts = append(parts, id+"="+string(mode))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// enforce applies the active modes (nil: every rule denies) to d. It tells
// report (and the log) about each violation of a rule in dryrun mode, and
// returns the violations that deny and the admission warnings.
func enforce(log logr.Logger, active *atomic.Pointer[Modes], report func(Violation), d Decision) (deny []Violation, warnings []string) {
	modes := Modes{}
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
