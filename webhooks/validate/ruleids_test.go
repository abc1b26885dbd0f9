package validate

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/virtstation/virtstation/policy"
)

func TestRegoRuleIDs(t *testing.T) {
	cases := map[string]struct {
		modules []Module
		want    []string
	}{
		"shipped":    {modules: ShippedModules(), want: []string{"disk-claim", "mount-path", "shared-memory"}},
		"literal id": {modules: operatorMaxDisks, want: []string{"max-disks"}},
		"id through a constant of the package": {modules: []Module{{Name: "a.rego", Source: `package virtstation.rules.a

name := "quota"

deny contains {"id": name, "field": "f", "message": "m"} if input.x
`}}, want: []string{"quota"}},
		"declared ids of computed violations": {modules: []Module{{Name: "b.rego", Source: `package virtstation.rules.b

rule_ids := {"b-one", "b-two"}

deny contains v if {
	some id in rule_ids
	v := {"id": id, "field": "f", "message": "m"}
}
`}}, want: []string{"b-one", "b-two"}},
		"helper function": {modules: []Module{{Name: "c.rego", Source: `package virtstation.rules.c

v(m) := {"id": "c-rule", "field": "f", "message": m}

deny contains v("x") if input.x
`}}, want: []string{"c-rule"}},
		"tests and other packages are not rules": {modules: []Module{
			{Name: "d_test.rego", Source: "package virtstation.rules.d_test\n\nx := {\"id\": \"from-a-test\"}\n"},
			{Name: "lib.rego", Source: "package virtstation.lib\n\nrule_id := \"lib\"\n\nx := {\"id\": \"from-a-library\"}\n"},
		}},
		"broken module": {modules: []Module{{Name: "e.rego", Source: "package virtstation.rules.e\n\ndeny contains {"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RegoRuleIDs(tc.modules); !slices.Equal(got, tc.want) {
				t.Errorf("RegoRuleIDs = %q, want %q", got, tc.want)
			}
		})
	}
}

// ruleInMessage is a rule id written into a Go denial's message.
var ruleInMessage = regexp.MustCompile(`\(rule: ([a-z][a-z0-9-]*)[;)]`)

// ruleConstant is a rule id named through package policy's constants (as
// policy.Explain's callers do): known by construction, counted so that the
// walk is seen to look in the right place.
var ruleConstant = regexp.MustCompile(`\bpolicy\.Rule[A-Z][A-Za-z]*\b`)

// Every rule id a Go denial's message names literally is one of
// policy.GoRules or a shipped Rego rule, so that the modes ConfigMap
// validation knows it. (Ids passed as constants come from policy.)
func TestGoDenialsNameKnownRules(t *testing.T) {
	rego := RegoRuleIDs(ShippedModules())
	root := filepath.Join("..", "..")
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "test", "testdata", "node_modules", "web", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found += len(ruleConstant.FindAllString(string(src), -1))
		for _, m := range ruleInMessage.FindAllStringSubmatch(string(src), -1) {
			found++
			if _, ok := policy.LookupGoRule(m[1]); !ok && !slices.Contains(rego, m[1]) {
				t.Errorf("%s: a denial names rule %q, which is neither in policy.GoRules nor a shipped Rego rule", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 10 {
		t.Fatalf("found only %d rule ids in Go denials; is the walk looking in the right place?", found)
	}
}
