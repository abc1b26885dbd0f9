package policy

import (
	"fmt"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	tests := map[string]struct {
		detail, rule, fix string
		want              string
	}{
		"detail, rule and fix": {
			detail: "mount path /etc is a system directory", rule: "mount-path", fix: "mount under /data",
			want: "mount path /etc is a system directory (rule: mount-path; fix: mount under /data)",
		},
		"no detail":           {rule: RuleGPUs, fix: "give a count", want: "(rule: gpus; fix: give a count)"},
		"surrounding space":   {detail: "  not a size ", rule: RuleLimits, fix: "shorten it", want: "not a size  (rule: limits; fix: shorten it)"},
		"a fix with a clause": {detail: "d", rule: RuleDiskClaim, fix: "retry in 5s; or detach it", want: "d (rule: disk-claim; fix: retry in 5s; or detach it)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Explain(tc.detail, tc.rule, tc.fix)
			if got != tc.want {
				t.Errorf("Explain = %q, want %q", got, tc.want)
			}
			// The shape the mutating webhook spelled by hand.
			if old := strings.TrimSpace(fmt.Sprintf("%s (rule: %s; fix: %s)", tc.detail, tc.rule, tc.fix)); got != old {
				t.Errorf("Explain = %q, the hand-written shape gives %q", got, old)
			}
		})
	}
}
