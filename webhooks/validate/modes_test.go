package validate

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseModes(t *testing.T) {
	cases := map[string]struct {
		data    map[string]string
		want    Modes
		wantErr []string
	}{
		"empty":         {data: nil, want: Modes{}},
		"all three":     {data: map[string]string{"mount-path": "warn", "disk-claim": "deny", "shared-memory": " dryrun\n"}, want: Modes{"mount-path": ModeWarn, "disk-claim": ModeDeny, "shared-memory": ModeDryRun}},
		"operator rule": {data: map[string]string{"max-disks": "warn"}, want: Modes{"max-disks": ModeWarn}},
		"bad values": {
			data:    map[string]string{"mount-path": "block", "disk-claim": "Warn", "shared-memory": "deny"},
			wantErr: []string{`data[disk-claim]: Unsupported value: "Warn"`, `data[mount-path]: Unsupported value: "block"`, `"deny", "dryrun", "warn"`},
		},
		"empty value": {
			data:    map[string]string{"mount-path": ""},
			wantErr: []string{`data[mount-path]: Unsupported value: ""`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModes(tc.data)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("modes %v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want.String() || len(got) != len(tc.want) {
				t.Errorf("modes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestModesApply(t *testing.T) {
	mp := Violation{ID: "mount-path", Field: "f1", Message: "m1"}
	dc := Violation{ID: "disk-claim", Field: "f2", Message: "m2"}
	sm := Violation{ID: "shared-memory", Field: "f3", Message: "m3"}
	op := Violation{ID: "max-disks", Field: "f4", Message: "m4"}
	advice := Violation{ID: "advice", Field: "f5", Message: "m5"}
	d := Decision{Deny: []Violation{dc, op, mp, sm}, Warn: []Violation{advice}}
	cases := map[string]struct {
		modes                Modes
		deny, warn, observed []Violation
	}{
		"default denies": {modes: nil, deny: []Violation{dc, op, mp, sm}, warn: []Violation{advice}},
		"per rule": {
			modes: Modes{"mount-path": ModeWarn, "shared-memory": ModeDryRun, "disk-claim": ModeDeny, "unknown": ModeWarn},
			deny:  []Violation{dc, op}, warn: []Violation{advice, mp}, observed: []Violation{sm},
		},
		"warn set ignores modes": {
			modes: Modes{"advice": ModeDryRun, "max-disks": ModeDryRun},
			deny:  []Violation{dc, mp, sm}, warn: []Violation{advice}, observed: []Violation{op},
		},
		"unknown mode denies": {modes: Modes{"mount-path": "block"}, deny: []Violation{dc, op, mp, sm}, warn: []Violation{advice}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deny, warn, observed := tc.modes.Apply(d)
			if !slices.Equal(deny, tc.deny) || !slices.Equal(warn, tc.warn) || !slices.Equal(observed, tc.observed) {
				t.Errorf("Apply = %v / %v / %v, want %v / %v / %v", deny, warn, observed, tc.deny, tc.warn, tc.observed)
			}
		})
	}
}

func TestModesString(t *testing.T) {
	if s := (Modes{}).String(); s != "all rules deny" {
		t.Errorf("empty: %q", s)
	}
	if s := (Modes{"b": ModeWarn, "a": ModeDryRun}).String(); s != "a=dryrun, b=warn" {
		t.Errorf("String() = %q", s)
	}
	if m := (Modes(nil)).Mode("x"); m != ModeDeny {
		t.Errorf("nil Modes: %q", m)
	}
}

// The modes ConfigMap names rules: a Go check that always denies, or an id
// no rule of the policy set defines, is refused on its key, with the fix.
func TestValidateModesRules(t *testing.T) {
	known := modeRulesOf(Merge(ShippedModules(), operatorMaxDisks))
	cases := map[string]struct {
		data  map[string]string
		known modeRules
		want  []string // substrings of the errors
		n     int      // how many errors; 0 means len(want)
	}{
		"shipped and operator rules": {data: map[string]string{"mount-path": "warn", "disk-claim": "dryrun", "shared-memory": "deny", "max-disks": "warn", "policy": "warn"}, known: known},
		"mutating webhook rule": {
			data: map[string]string{"data-disks": "warn"}, known: known,
			want: []string{"data[data-disks]: Forbidden: rule data-disks is checked by the mutating webhook", "fix: remove the key data-disks; modes apply to disk-claim, max-disks, mount-path, policy, shared-memory)"},
			n:    1,
		},
		"every Go rule that always denies": {
			data:  map[string]string{"cloud-init": "warn", "data-disk-delete": "dryrun", "gpus": "warn", "limits": "warn", "mac": "dryrun", "policy-budget": "warn", "policy-deadline": "dryrun", "secrets": "warn", "ssh-keys": "warn", "video": "warn"},
			known: known,
			want: []string{"data[cloud-init]: Forbidden", "data[data-disk-delete]: Forbidden: rule data-disk-delete guards deleting", "data[gpus]: Forbidden", "data[limits]: Forbidden", "data[mac]: Forbidden",
				"data[policy-budget]: Forbidden", "data[policy-deadline]: Forbidden: rule policy-deadline denies a VM whose policies could not be evaluated in time", "data[secrets]: Forbidden", "data[ssh-keys]: Forbidden", "data[video]: Forbidden"},
		},
		"unknown id": {
			data: map[string]string{"mount-paths": "warn"}, known: known,
			want: []string{`data[mount-paths]: Invalid value: "mount-paths": no rule has the id mount-paths, so this mode would do nothing (fix: use the id of a rule that takes a mode: disk-claim, max-disks, mount-path, policy, shared-memory; for a rule of an operator policy, apply its policy ConfigMap first)`},
		},
		"operator rule not loaded": {
			data: map[string]string{"max-disks": "warn"}, known: modeRulesOf(ShippedModules()),
			want: []string{"no rule has the id max-disks"},
		},
		"bad id and bad value": {
			data: map[string]string{"gpus": "block"}, known: known,
			want: []string{"data[gpus]: Forbidden", `data[gpus]: Unsupported value: "block"`},
		},
		"unknown ids unchecked without a policy set": {data: map[string]string{"max-disks": "warn"}},
		"Go rules refused without a policy set": {
			data: map[string]string{"gpus": "warn"},
			want: []string{"data[gpus]: Forbidden", "modes apply to disk-claim, mount-path, shared-memory and the rules of operator policies"},
			n:    1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := validateModes(tc.data, field.NewPath("data"), tc.known)
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			n := tc.n
			if n == 0 {
				n = len(tc.want)
			}
			if len(errs) != n {
				t.Errorf("%d errors, want %d: %v", len(errs), n, errs)
			}
			got := errs.ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors %q lack %q", got, w)
				}
			}
		})
	}
}

// The loader refuses a mode on a Go check that always denies, as the
// webhook does: such a ConfigMap applied without the policy label, which
// the webhook never sees, does not load either.
func TestParseModesRefusesGoRules(t *testing.T) {
	if _, err := ParseModes(map[string]string{"data-disks": "warn"}); err == nil || !strings.Contains(err.Error(), "data[data-disks]: Forbidden") {
		t.Errorf("ParseModes(data-disks: warn) = %v, want a refusal on data[data-disks]", err)
	}
}

// The ConfigMap webhook checks the modes against the loaded policy set:
// the shipped rules and those of the policy ConfigMaps in the namespace.
func TestConfigMapValidatorModes(t *testing.T) {
	f := newLoaderFixture(t, policyConfigMap("max-disks", sources(operatorMaxDisks)))
	withSet := &ConfigMapValidator{Namespace: installNS, Reader: f.client}
	shippedOnly := &ConfigMapValidator{Namespace: installNS}
	cases := map[string]struct {
		v       *ConfigMapValidator
		data    map[string]string
		allowed bool
		want    string
	}{
		"shipped rule":             {v: shippedOnly, data: map[string]string{"mount-path": "warn"}, allowed: true},
		"operator rule in the set": {v: withSet, data: map[string]string{"max-disks": "dryrun"}, allowed: true},
		"operator rule not in the set": {v: shippedOnly, data: map[string]string{"max-disks": "dryrun"},
			want: "cause data[max-disks]: Invalid value: \"max-disks\": no rule has the id max-disks"},
		"mutating webhook rule": {v: withSet, data: map[string]string{"data-disks": "warn"},
			want: "cause data[data-disks]: Forbidden: rule data-disks is checked by the mutating webhook, which cannot build the VM it describes, so it always denies; an enforcement mode cannot change that (fix: remove the key data-disks; modes apply to disk-claim, max-disks, mount-path, policy, shared-memory)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := tc.v.Handle(context.Background(), configMapRequest(t, admissionv1.Create, modesConfigMap(tc.data)))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %s", resp.Allowed, tc.allowed, deniedText(resp))
			}
			if !tc.allowed && (resp.Result.Code != http.StatusForbidden || !strings.Contains(deniedText(resp), tc.want)) {
				t.Errorf("denial %d %q, want 403 with %q", resp.Result.Code, deniedText(resp), tc.want)
			}
		})
	}
}
