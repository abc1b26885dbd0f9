package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

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
// key or value: a value other than deny, warn or dryrun, or the id of a Go
// check that always denies (GoRules). Ids no rule defines are not checked
// here (the policy set may change after the modes were applied); the
// ConfigMap webhook refuses them at apply time.
func ParseModes(data map[string]string) (Modes, error) {
	if errs := ValidateModes(data, field.NewPath("data"), nil); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	m := make(Modes, len(data))
	for id, v := range data {
		m[id] = Mode(strings.TrimSpace(v))
	}
	return m, nil
}

// ValidateModes checks the modes ConfigMap's data; fld is the path of data.
// Each key must be the id of a rule that takes a mode: not a Go check that
// always denies and, when known is not nil, one of known (the sorted ids of
// the rules that take a mode with the loaded policy set). Each value must
// be a mode.
func ValidateModes(data map[string]string, fld *field.Path, known []string) field.ErrorList {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		if err := validateModeRule(k, fld.Key(k), known); err != nil {
			errs = append(errs, err)
		}
		switch Mode(strings.TrimSpace(data[k])) {
		case ModeDeny, ModeWarn, ModeDryRun:
		default:
			errs = append(errs, field.NotSupported(fld.Key(k), data[k], supportedModes))
		}
	}
	return errs
}

// validateModeRule checks that the rule id can take a mode.
func validateModeRule(id string, fld *field.Path, known []string) *field.Error {
	takers := "disk-claim, mount-path, shared-memory and the rules of operator policies"
	if known != nil {
		takers = strings.Join(known, ", ")
	}
	if r, ok := LookupGoRule(id); ok && !r.Modes {
		return field.Forbidden(fld, fmt.Sprintf(
			"rule %s %s; an enforcement mode cannot change that (fix: remove the key %s; modes apply to %s)",
			id, r.Why, id, takers))
	}
	if known != nil && !slices.Contains(known, id) {
		return field.Invalid(fld, id, fmt.Sprintf(
			"no rule has the id %s, so this mode would do nothing (fix: use the id of a rule that takes a mode: %s; "+
				"for a rule of an operator policy, apply its policy ConfigMap first)", id, takers))
	}
	return nil
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
	SortViolations(warn)
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
