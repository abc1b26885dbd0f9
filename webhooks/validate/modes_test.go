package validate

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/policy"
)

// The modes ConfigMap names rules: a Go check that always denies, or an id
// no rule of the policy set defines, is refused on its key, with the fix.
func TestValidateModesRules(t *testing.T) {
	known := modeRulesOf(Merge(ShippedModules(), operatorMaxDisks))
	cases := map[string]struct {
		data  map[string]string
		known []string
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
			errs := policy.ValidateModes(tc.data, field.NewPath("data"), tc.known)
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
