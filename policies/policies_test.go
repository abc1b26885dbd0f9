package policies_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/virtstation/virtstation/policies"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// TestRego runs the Rego tests of the embedded policies, compiled as the
// webhook compiles them (strict, Rego v1, no network built-ins): the same
// check as `opa test policies/`.
func TestRego(t *testing.T) {
	if err := validate.RunTests(context.Background(), validate.ShippedModules()); err != nil {
		t.Fatal(err)
	}
}

// TestEveryRuleHasTests: each policy file has its _test.rego beside it.
func TestEveryRuleHasTests(t *testing.T) {
	names, err := fs.Glob(policies.FS, "*.rego")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, n := range names {
		if !strings.HasSuffix(n, "_test.rego") && !have[strings.TrimSuffix(n, ".rego")+"_test.rego"] {
			t.Errorf("%s has no %s_test.rego", n, strings.TrimSuffix(n, ".rego"))
		}
	}
}
