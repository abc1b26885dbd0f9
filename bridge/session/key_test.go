package session

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLeaseName(t *testing.T) {
	long := strings.Repeat("a", 253)
	keys := []Key{
		{Namespace: "default", Name: "ws", Mode: "console"},
		{Namespace: strings.Repeat("n", 63), Name: long, Mode: "vnc"},
		{Namespace: "team-a", Name: "ws.with.dots", Mode: strings.Repeat("m", maxModeLength)},
	}
	seen := map[string]Key{}
	for _, k := range keys {
		if err := k.validate(); err != nil {
			t.Fatalf("%v", err)
		}
		name := leaseName(k)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("lease name %q for %v: %v", name, k, errs)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%v and %v share lease name %q", k, other, name)
		}
		seen[name] = k
	}
	// The VM, not only the string ns+name, decides the name.
	if leaseName(Key{Namespace: "ab", Name: "c", Mode: "vnc"}) == leaseName(Key{Namespace: "a", Name: "bc", Mode: "vnc"}) {
		t.Error("ab/c and a/bc share a lease name")
	}
}

func TestKeyValidate(t *testing.T) {
	tests := map[string]struct {
		key     Key
		wantErr string
	}{
		"valid":           {key: Key{Namespace: "ns", Name: "vm", Mode: "ssh"}},
		"empty namespace": {key: Key{Name: "vm", Mode: "ssh"}, wantErr: `namespace ""`},
		"name with slash": {key: Key{Namespace: "ns", Name: "a/b", Mode: "ssh"}, wantErr: `name "a/b"`},
		"upper-case mode": {key: Key{Namespace: "ns", Name: "vm", Mode: "VNC"}, wantErr: `mode "VNC"`},
		"overlong mode":   {key: Key{Namespace: "ns", Name: "vm", Mode: strings.Repeat("m", maxModeLength+1)}, wantErr: "at most 30 characters"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.key.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
