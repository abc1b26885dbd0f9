package admit_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/virtstation/virtstation/"

// TestLayers keeps the imports running down the layers: the enforcement
// vocabulary (policy) at the bottom, then api, then the admission plumbing
// (admit) and claims, then the webhooks (docs/architecture.md). A package
// that needs something from a layer above it has found vocabulary or
// plumbing that belongs lower down.
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
		// external, when not nil, are the only packages outside the module
		// and the standard library they may depend on.
		external []string
		// forbiddenExternal are import path prefixes outside the module they
		// must not depend on.
		forbiddenExternal []string
	}{
		"policy imports no Virtstation package and nothing heavy": {
			packages: []string{module + "policy"},
			allowed:  []string{"policy"},
			// field, and what field itself imports.
			external: []string{"k8s.io/apimachinery/pkg/util/validation/field", "k8s.io/apimachinery/pkg/util/errors", "k8s.io/apimachinery/pkg/util/sets"},
		},
		"api depends on no other layer": {
			packages: []string{module + "api"},
			allowed:  []string{"api", "mac", "policy"},
		},
		"the audit's results take the vocabulary from policy, not from a webhook": {
			packages:          []string{module + "policyreport"},
			allowed:           []string{"policyreport", "policy", "api", "mac"},
			forbiddenExternal: []string{"github.com/open-policy-agent/"},
		},
		"admit imports no Virtstation package": {
			packages: []string{module + "webhooks/admit"},
			allowed:  []string{"webhooks/admit"},
		},
		"the disk lookup sits on claims, below the webhooks": {
			packages: []string{module + "disks"},
			allowed:  []string{"policy", "api", "mac", "webhooks/admit", "claims", "disks"},
		},
		// The deletion guard (claims/guard.go) is an admission handler: it
		// answers with admit.Deny and admit.Internal, as the webhooks do.
		"claims takes its vocabulary from policy and api and its plumbing from admit": {
			packages: []string{module + "claims/..."},
			allowed:  []string{"policy", "api", "mac", "webhooks/admit", "claims"},
		},
		"the lifecycle defaults reader sits on api": {
			packages: []string{module + "lifecycle/defaults"},
			allowed:  []string{"policy", "api", "mac", "lifecycle/defaults"},
		},
		// The webhooks and render read the lifecycle's defaults as the
		// controller does (lifecycle/defaults), never the controller itself.
		"the webhooks and render do not import the lifecycle controller": {
			packages: []string{module + "webhooks/mutate/...", module + "webhooks/validate/...", module + "render/..."},
			allowed: []string{"policy", "api", "mac", "claims", "cloudinit", "disks", "lifecycle/defaults", "policies", "policyreport", "render",
				"sshkeys", "userdata", "vmsecret", "webhooks/admit", "webhooks/mutate", "webhooks/provenance", "webhooks/validate"},
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
					checkExternal(t, tc.packages, dep, tc.external, tc.forbiddenExternal)
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

// checkExternal checks dep, a dependency of packages outside the module,
// against external (nil: any) and forbidden (import path prefixes).
func checkExternal(t *testing.T, packages []string, dep string, external, forbidden []string) {
	t.Helper()
	for _, f := range forbidden {
		if strings.HasPrefix(dep, f) {
			t.Errorf("%v depend on %s", packages, dep)
		}
	}
	if external != nil && !slices.Contains(external, dep) {
		t.Errorf("%v depend on %s; allowed outside the standard library are %v", packages, dep, external)
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
