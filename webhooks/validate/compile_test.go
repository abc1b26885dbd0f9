package validate

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileRejects(t *testing.T) {
	cases := map[string]struct {
		source string
		want   []string
	}{
		"parse error": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := \n}\n",
			want:   []string{"x.rego:5: rego_parse_error"},
		},
		"unsafe variable": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv.id == \"x\"\n}\n",
			want:   []string{"x.rego:4: rego_unsafe_var_error: var v is unsafe"},
		},
		"undefined function": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := nosuch.fn(input.name)\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function nosuch.fn"},
		},
		"undefined local": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := undefined_rule\n}\n",
			want:   []string{"x.rego:4: rego_unsafe_var_error: var undefined_rule is unsafe"},
		},
		"strict: unused import": {
			source: "package virtstation.rules.x\n\nimport data.virtstation.rules.mount_path\n\ndeny contains 1 if input.x\n",
			want:   []string{"x.rego:3: rego_compile_error: import data.virtstation.rules.mount_path unused"},
		},
		"strict: unused local": {
			source: "package virtstation.rules.x\n\ndeny contains 1 if {\n\tunused := input.x\n\tinput.y\n}\n",
			want:   []string{"x.rego:4: rego_compile_error: assigned var unused unused"},
		},
		"http.send": {
			source: "package virtstation.rules.x\n\ndeny contains r.body if {\n\tr := http.send({\"method\": \"GET\", \"url\": \"https://example.com\"})\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function http.send", "are disabled in virtstation policies"},
		},
		"net.lookup_ip_addr": {
			source: "package virtstation.rules.x\n\ndeny contains a if {\n\tsome a in net.lookup_ip_addr(\"example.com\")\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function net.lookup_ip_addr", "disabled"},
		},
		"net.cidr_contains": {
			source: "package virtstation.rules.x\n\ndeny contains 1 if net.cidr_contains(\"10.0.0.0/8\", input.ip)\n",
			want:   []string{"x.rego:3: rego_type_error: undefined function net.cidr_contains"},
		},
		"opa.runtime": {
			source: "package virtstation.rules.x\n\ndeny contains opa.runtime().env.HOME if true\n",
			want:   []string{"x.rego:3: rego_type_error: undefined function opa.runtime"},
		},
		"rego v0 syntax": {
			source: "package virtstation.rules.x\n\ndeny[msg] {\n\tmsg := \"x\"\n}\n",
			want:   []string{"x.rego:3: rego_parse_error"},
		},
		"conflict with shipped rule": {
			source: "package virtstation\n\ndeny := 1\n",
			want:   []string{"rego_type_error: conflicting rules data.virtstation.deny"},
		},
		"empty": {
			source: "",
			want:   []string{"x.rego"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(Merge(ShippedModules(), []Module{{Name: "x.rego", Source: tc.source}}))
			if err == nil {
				t.Fatal("compiled")
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v (%T) is no *PolicyError with problems", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCompileAllowsPureBuiltins(t *testing.T) {
	src := "package virtstation.rules.x\n\ndeny contains msg if {\n\tprint(input.name)\n\tregex.match(`^x`, input.name)\n\tmsg := sprintf(\"%s at %d\", [upper(input.name), time.now_ns()])\n}\n"
	if _, err := Compile([]Module{{Name: "x.rego", Source: src}}); err != nil {
		t.Fatal(err)
	}
}
