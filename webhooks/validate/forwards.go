package validate

import "github.com/virtstation/virtstation/policy"

// Forwards to the enforcement vocabulary, which moved to package policy,
// for the packages that still name it here (render, webhooks/audit,
// webhooks/setup.go and tests under test/). New code imports policy; remove
// these once those packages do.
type (
	// Violation is policy.Violation.
	Violation = policy.Violation
	// Decision is policy.Decision.
	Decision = policy.Decision
	// Mode is policy.Mode.
	Mode = policy.Mode
	// Modes is policy.Modes.
	Modes = policy.Modes
)

// Forwarded constants: see the forwarded types.
const (
	// ModesConfigMapName is policy.ModesConfigMapName.
	ModesConfigMapName = policy.ModesConfigMapName
	// ModeDeny is policy.ModeDeny.
	ModeDeny = policy.ModeDeny
	// ModeWarn is policy.ModeWarn.
	ModeWarn = policy.ModeWarn
	// ModeDryRun is policy.ModeDryRun.
	ModeDryRun = policy.ModeDryRun
)

// ParseModes is policy.ParseModes.
func ParseModes(data map[string]string) (policy.Modes, error) { return policy.ParseModes(data) }
