package validate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRunTests(t *testing.T) {
	if err := RunTests(context.Background(), ShippedModules()); err != nil {
		t.Fatalf("shipped tests: %v", err)
	}
	failing := Module{Name: "x_test.rego", Source: "package virtstation.rules.mount_path\n\ntest_passes if true\n\ntest_etc_allowed if {\n\tprint(\"checking /etc\")\n\tcount(deny) == 0 with input as {\"dataDisks\": [{\"mountPath\": \"/etc\"}]}\n}\n\ntest_errors if {\n\tx := 1 / 0\n\tx > 0\n}\n"}
	err := RunTests(context.Background(), Merge(ShippedModules(), []Module{failing}))
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v, want a *PolicyError", err)
	}
	for _, w := range []string{
		"x_test.rego:5: test data.virtstation.rules.mount_path.test_etc_allowed failed",
		"x_test.rego:10: test data.virtstation.rules.mount_path.test_errors",
		"test_etc_allowed failed; printed: checking /etc",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "test_passes") {
		t.Errorf("error %q lists a passing test", err)
	}
	if got := pe.Files(); !slices.Equal(got, []string{"x_test.rego"}) {
		t.Errorf("Files() = %v", got)
	}
}

func TestRunTestsReportsCompileErrors(t *testing.T) {
	err := RunTests(context.Background(), []Module{{Name: "bad_test.rego", Source: "package p\n\ntest_x if http.send({})\n"}})
	if err == nil || !strings.Contains(err.Error(), "bad_test.rego:3: rego_type_error: undefined function http.send") {
		t.Fatalf("error %v", err)
	}
}
