package validate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/policy"
)

// ViolationErrors is how a denial shows deny violations: one Forbidden
// field error a violation, at the violation's field, whose detail is the
// rule's own message (which names the rule and the fix) without surrounding
// space. The webhooks deny with it and `virtstation render` reports with it,
// so both say the same.
func ViolationErrors(vs []policy.Violation) field.ErrorList {
	out := make(field.ErrorList, 0, len(vs))
	for _, v := range vs {
		out = append(out, &field.Error{Type: field.ErrorTypeForbidden, Field: v.Field, Detail: strings.TrimSpace(v.Message)})
	}
	return out
}

// ViolationWarnings is how an admission warns of violations: one warning a
// violation, "virtstation policy <id>: <field>: <message>". The webhooks
// and `virtstation render` both warn with it.
func ViolationWarnings(vs []policy.Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, fmt.Sprintf("virtstation policy %s: %s: %s", v.ID, v.Field, v.Message))
	}
	return out
}
