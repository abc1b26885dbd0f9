// Package policy is Virtstation's enforcement vocabulary: the rule ids and
// the table of the checks written in Go (GoRules), what one evaluation of
// the policies decides (Decision, Violation), the per-rule enforcement
// modes (Modes, read from the virtstation-policy-config ConfigMap), and
// Explain, the one constructor of the "(rule: <id>; fix: <how>)" that ends
// every admission denial. The webhooks, the deletion guard, the audit
// (policyreport), `virtstation render` and the docs' rule table take these
// words from here.
//
// It is the vocabulary, not the policies: the shipped Rego modules are
// package policies (policies/*.rego, embedded), and evaluating them is
// webhooks/validate's job. It sits at the bottom of the tree and imports no
// Virtstation package, only the standard library and apimachinery's field
// errors.
package policy
