package policy

import "strings"

// Explain is the message of an admission denial: what is wrong (detail),
// then the rule that denies and how to fix it, "<detail> (rule: <rule>;
// fix: <fix>)". Surrounding space is trimmed, so an empty detail (such as a
// field.Required error's) gives "(rule: <rule>; fix: <fix>)".
func Explain(detail, rule, fix string) string {
	return strings.TrimSpace(detail + " (rule: " + rule + "; fix: " + fix + ")")
}
