package admit_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/virtstation/virtstation/"

// TestLayers keeps the imports running down the layers: api at the bottom,
// then the admission plumbing (admit) and claims, then the webhooks. A
// package that needs something from a layer above it has found vocabulary
// or plumbing that belongs lower down.
func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	tests := map[string]struct {
		// packages are patterns for go list.
		packages []string
		// allowed are the only Virtstation packages they may depend on
		// (besides themselves); nil allows any not in forbidden.
		allowed []string
		// forbidden are Virtstation packages they must not depend on.
		forbidden []string
	}{
		"api depends on no other layer": {
			packages: []string{module + "api"},
			allowed:  []string{"api", "mac"},
		},
		"admit imports no Virtstation package": {
			packages: []string{module + "webhooks/admit"},
			allowed:  []string{"webhooks/admit"},
		},
		"the disk lookup sits on claims, below the webhooks": {
			packages: []string{module + "disks"},
			allowed:  []string{"api", "mac", "webhooks/admit", "claims", "disks"},
		},
		"claims takes its vocabulary from api and its plumbing from admit": {
			packages: []string{module + "claims/..."},
			allowed:  []string{"api", "mac", "webhooks/admit", "claims"},
		},
		"no webhook reaches into the mutating webhook": {
			packages:  []string{module + "claims/...", module + "sshkeys/...", module + "webhooks/validate/..."},
			forbidden: []string{"webhooks/mutate"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`}, tc.packages...)
			out, err := exec.Command(goTool, args...).Output()
			if err != nil {
				t.Fatalf("go %s: %v", strings.Join(args, " "), err)
			}
			for _, dep := range strings.Fields(string(out)) {
				own, ok := strings.CutPrefix(dep, module)
				if !ok {
					continue
				}
				for _, f := range tc.forbidden {
					if own == f || strings.HasPrefix(own, f+"/") {
						t.Errorf("%v depend on %s", tc.packages, dep)
					}
				}
				if tc.allowed != nil && !allowedIn(own, tc.allowed) {
					t.Errorf("%v depend on %s; allowed are %v", tc.packages, dep, tc.allowed)
				}
			}
		})
	}
}

func allowedIn(pkg string, allowed []string) bool {
	for _, a := range allowed {
		if pkg == a || strings.HasPrefix(pkg, a+"/") {
			return true
		}
	}
	return false
}
