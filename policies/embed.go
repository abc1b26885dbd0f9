// Package policies holds Virtstation's shipped Rego policies and their
// tests. They are embedded in the binary; webhooks/validate compiles them
// (with any operator modules from ConfigMaps) and evaluates
// data.virtstation.deny and data.virtstation.warn on each admission.
//
// Each rule is its own package, virtstation.rules.<id with _>, in <id>.rego
// beside <id>_test.rego. virtstation.rego collects the deny and warn sets of
// every package under virtstation.rules. Run the Rego tests with
// `opa test policies/` (or `virtstation policy test`).
//
// These are the shipped policies, not the vocabulary: the rule ids, the
// Decision and Violation an evaluation gives, the enforcement modes and
// the denial constructor (Explain) are package policy.
package policies

import "embed"

// FS holds every *.rego file of this directory, tests included.
//
//go:embed *.rego
var FS embed.FS
