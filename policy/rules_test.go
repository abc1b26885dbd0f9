package policy

import (
	"sort"
	"testing"
)

func TestGoRulesSorted(t *testing.T) {
	if !sort.SliceIsSorted(GoRules, func(i, j int) bool { return GoRules[i].ID < GoRules[j].ID }) {
		t.Fatal("GoRules is not sorted by id: LookupGoRule searches it")
	}
	for _, r := range GoRules {
		if got, ok := LookupGoRule(r.ID); !ok || got != r {
			t.Errorf("LookupGoRule(%q) = %v, %v", r.ID, got, ok)
		}
		if !r.Modes && r.Why == "" {
			t.Errorf("rule %s always denies but does not say why", r.ID)
		}
	}
	if _, ok := LookupGoRule("mount-path"); ok {
		t.Error("mount-path is a Rego rule, not a Go one")
	}
}
