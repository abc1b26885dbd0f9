package validate

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/policy"
)

// TestViolationFormat: what a user reads for a deny or warn violation, the
// same from the webhooks and from `virtstation render`.
func TestViolationFormat(t *testing.T) {
	const annotation = "metadata.annotations[virtstation.io/data-disks][0].mountPath"
	mountPath := policy.Violation{ID: "mount-path", Field: annotation,
		Message: "mount path /etc is a system directory (rule: mount-path; fix: mount under /data)"}
	tests := map[string]struct {
		in           []policy.Violation
		wantErrors   field.ErrorList
		wantText     string
		wantWarnings []string
	}{
		"none": {
			wantErrors: field.ErrorList{}, wantWarnings: []string{},
		},
		"one violation": {
			in:           []policy.Violation{mountPath},
			wantErrors:   field.ErrorList{&field.Error{Type: field.ErrorTypeForbidden, Field: annotation, Detail: mountPath.Message}},
			wantText:     annotation + ": Forbidden: mount path /etc is a system directory (rule: mount-path; fix: mount under /data)",
			wantWarnings: []string{"virtstation policy mount-path: " + annotation + ": mount path /etc is a system directory (rule: mount-path; fix: mount under /data)"},
		},
		"a message with surrounding space denies without it": {
			in:           []policy.Violation{{ID: "team", Field: "metadata.labels[team]", Message: "  a team label is required (rule: team; fix: add one)\n"}},
			wantErrors:   field.ErrorList{&field.Error{Type: field.ErrorTypeForbidden, Field: "metadata.labels[team]", Detail: "a team label is required (rule: team; fix: add one)"}},
			wantText:     "metadata.labels[team]: Forbidden: a team label is required (rule: team; fix: add one)",
			wantWarnings: []string{"virtstation policy team: metadata.labels[team]:   a team label is required (rule: team; fix: add one)\n"},
		},
		// field.Error reads ": Forbidden: ..." when the rule names no field.
		"a rule that names no field or id": {
			in:           []policy.Violation{{ID: policy.RuleUnnamed, Message: "plain message"}},
			wantErrors:   field.ErrorList{&field.Error{Type: field.ErrorTypeForbidden, Detail: "plain message"}},
			wantText:     ": Forbidden: plain message",
			wantWarnings: []string{"virtstation policy policy: : plain message"},
		},
		"several keep their order": {
			in: []policy.Violation{mountPath, {ID: "shared-memory", Field: "metadata.annotations[virtstation.io/shared-memory]", Message: "not a size"}},
			wantErrors: field.ErrorList{
				&field.Error{Type: field.ErrorTypeForbidden, Field: annotation, Detail: mountPath.Message},
				&field.Error{Type: field.ErrorTypeForbidden, Field: "metadata.annotations[virtstation.io/shared-memory]", Detail: "not a size"},
			},
			wantText: "[" + annotation + ": Forbidden: mount path /etc is a system directory (rule: mount-path; fix: mount under /data), " +
				"metadata.annotations[virtstation.io/shared-memory]: Forbidden: not a size]",
			wantWarnings: []string{
				"virtstation policy mount-path: " + annotation + ": " + mountPath.Message,
				"virtstation policy shared-memory: metadata.annotations[virtstation.io/shared-memory]: not a size",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := ViolationErrors(tc.in)
			if !slices.EqualFunc(errs, tc.wantErrors, func(a, b *field.Error) bool { return *a == *b }) {
				t.Errorf("ViolationErrors = %v, want %v", errs, tc.wantErrors)
			}
			if got := errs.ToAggregate(); (got == nil) != (tc.wantText == "") || (got != nil && got.Error() != tc.wantText) {
				t.Errorf("denial reads %q, want %q", got, tc.wantText)
			}
			if got := ViolationWarnings(tc.in); !slices.Equal(got, tc.wantWarnings) {
				t.Errorf("ViolationWarnings = %q, want %q", got, tc.wantWarnings)
			}
		})
	}
}
