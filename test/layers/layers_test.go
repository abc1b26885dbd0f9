package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/virtstation/virtstation/"

// pkg is what `go list -json` says of a package, without its tests.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list on patterns from the module's root.
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestProductionCodeImportsNoTestPackage: test/ holds tests only, and what
// ships (the binaries and their packages) links none of it.
func TestProductionCodeImportsNoTestPackage(t *testing.T) {
	for _, p := range list(t, "./...") {
		if strings.HasPrefix(p.ImportPath, module+"test/") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"test/") {
				t.Errorf("%s imports %s", p.ImportPath, imp)
			}
		}
	}
}

// TestLayers: who may depend on whom.
func TestLayers(t *testing.T) {
	rules := []struct {
		pkg       string
		forbidden []string // import path prefixes below the module
		why       string
	}{
		{"cmd/virtstation", []string{"internal/", "test/"}, "the CLI builds on every platform and links no test harness"},
		{"cmd/webhook", []string{"internal/", "test/"}, "a shipped binary links no test harness"},
		{"cmd/bridge", []string{"internal/", "test/"}, "a shipped binary links no test harness"},
	}
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			for _, p := range list(t, "./"+r.pkg) {
				for _, dep := range p.Deps {
					for _, f := range r.forbidden {
						if strings.HasPrefix(dep, module+f) {
							t.Errorf("%s depends on %s: %s", p.ImportPath, dep, r.why)
						}
					}
				}
			}
		})
	}
}
