package validate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

func configMapRequest(t *testing.T, op admissionv1.Operation, cm *corev1.ConfigMap) admission.Request {
	t.Helper()
	cm = cm.DeepCopy()
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	raw, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: op, Namespace: cm.Namespace, Name: cm.Name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// deniedText is the denial's message and its causes' fields.
func deniedText(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	s := resp.Result.Message
	if resp.Result.Details != nil {
		for _, c := range resp.Result.Details.Causes {
			s += "\ncause " + c.Field + ": " + c.Message
		}
	}
	return s
}

func TestConfigMapValidator(t *testing.T) {
	v := &ConfigMapValidator{Namespace: installNS}
	cases := map[string]struct {
		cm       *corev1.ConfigMap
		allowed  bool
		want     []string
		warnings []string
	}{
		"valid operator policy with tests": {
			cm:      policyConfigMap("max-disks", sources(operatorMaxDisks)),
			allowed: true,
		},
		"parse error": {
			cm:   policyConfigMap("p", map[string]string{"x.rego": "package virtstation.rules.x\n\ndeny contains 1 if {\n"}),
			want: []string{"data[x.rego]: Invalid value: x.rego:", "rego_parse_error", "cause data[x.rego]: "},
		},
		"compile error with line": {
			cm:   policyConfigMap("p", map[string]string{"ok.rego": "package virtstation.rules.ok\n", "x.rego": "package virtstation.rules.x\n\ndeny contains v if {\n\tv.id == 1\n}\n"}),
			want: []string{"data[x.rego]: Invalid value: x.rego:4: rego_unsafe_var_error: var v is unsafe"},
		},
		"http.send": {
			cm:   policyConfigMap("p", map[string]string{"x.rego": "package virtstation.rules.x\n\ndeny contains r if {\n\tr := http.send({\"method\": \"GET\", \"url\": \"http://x\"})\n}\n"}),
			want: []string{"data[x.rego]", "x.rego:4: rego_type_error: undefined function http.send", "disabled in virtstation policies"},
		},
		"net.lookup_ip_addr": {
			cm:   policyConfigMap("p", map[string]string{"x.rego": "package virtstation.rules.x\n\ndeny contains a if {\n\tsome a in net.lookup_ip_addr(\"example.com\")\n}\n"}),
			want: []string{"x.rego:4: rego_type_error: undefined function net.lookup_ip_addr"},
		},
		"failing test": {
			cm:   policyConfigMap("p", map[string]string{"x_test.rego": "package virtstation.rules.x\n\ntest_ok if true\n\ntest_bad if {\n\tfalse\n}\n"}),
			want: []string{"data[x_test.rego]: Invalid value: x_test.rego:5: test data.virtstation.rules.x.test_bad failed"},
		},
		"override breaks shipped tests": {
			cm:   policyConfigMap("p", map[string]string{"mount_path.rego": "package virtstation.rules.mount_path\n\ndeny contains 1 if false\n"}),
			want: []string{"mount_path_test.rego:", "failing with this ConfigMap's modules", "cause data: "},
		},
		"slow policy": {
			cm: policyConfigMap("p", map[string]string{"ok.rego": "package virtstation.rules.ok\n", "slow.rego": slowSource}),
			want: []string{"data[slow.rego]: Invalid value: module slow.rego (most of the time at line", "the 100ms budget",
				"sample input create-", "rule: policy-budget; fix: make slow.rego faster"},
		},
		"slow helper in a shipped-looking package": {
			cm:   policyConfigMap("p", sources(slowHelperModules)),
			want: []string{"data[expensive.rego]: Invalid value: module expensive.rego", "the 100ms budget"},
		},
		"test allocating 330 MiB": {
			cm: policyConfigMap("p", map[string]string{"ok.rego": "package virtstation.rules.ok\n", "hog_test.rego": hogTestSource}),
			want: []string{"data[hog_test.rego]: Invalid value: module hog_test.rego: test data.virtstation.rules.hog.test_range allocated more than the 64 MiB memory budget",
				"rule: policy-memory; fix: make hog_test.rego build smaller values"},
		},
		"rule allocating 330 MiB on the samples": {
			cm: policyConfigMap("p", map[string]string{"hogrule.rego": hogRuleSource}),
			// The time budget or the memory one: both name the module.
			want: []string{"data[hogrule.rego]: Invalid value: module hogrule.rego", "on the sample input"},
		},
		"fails to evaluate on a sample": {
			cm:   policyConfigMap("p", map[string]string{"conflict.rego": "package virtstation.rules.conflict\n\nx := 1\n\nx := 2 if input.operation\n\ndeny contains \"no\" if x == 3\n"}),
			want: []string{"data[conflict.rego]: Invalid value: conflict.rego:", "eval_conflict_error", "on the sample input"},
		},
		"no rego keys": {
			cm:       policyConfigMap("p", map[string]string{"notes": "x"}),
			allowed:  true,
			warnings: []string{"has no data key ending in .rego", "data[notes] is ignored"},
		},
		"rego in binaryData": {
			cm: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "p", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
				Data:       sources(operatorMaxDisks),
				BinaryData: map[string][]byte{"y.rego": []byte("package y")},
			},
			want: []string{"binaryData[y.rego]: Invalid value: Rego modules are read from data only"},
		},
		"modes": {
			cm:      modesConfigMap(map[string]string{"mount-path": "warn", "disk-claim": "dryrun"}),
			allowed: true,
		},
		"bad modes": {
			cm:   modesConfigMap(map[string]string{"mount-path": "block"}),
			want: []string{`data[mount-path]: Unsupported value: "block": supported values: "deny", "dryrun", "warn"`},
		},
		"labelled modes": {
			cm: &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: policy.ModesConfigMapName, Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
				Data:       map[string]string{"mount-path": "warn"},
			},
			allowed: true,
		},
		"other namespace": {
			cm:       &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}}, Data: map[string]string{"x.rego": "broken {"}},
			allowed:  true,
			warnings: []string{"only in namespace virtstation-system; this one is ignored"},
		},
		"unrelated": {
			cm:      &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "x", Labels: map[string]string{api.LabelPolicy: "maybe"}}, Data: map[string]string{"x.rego": "broken {"}},
			allowed: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
				resp := v.Handle(context.Background(), configMapRequest(t, op, tc.cm))
				if resp.Allowed != tc.allowed {
					t.Fatalf("%s: allowed = %v, want %v: %s", op, resp.Allowed, tc.allowed, deniedText(resp))
				}
				if !tc.allowed && resp.Result.Code != http.StatusForbidden {
					t.Errorf("%s: code %d, want 403", op, resp.Result.Code)
				}
				text := deniedText(resp)
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("%s: denial %q lacks %q", op, text, w)
					}
				}
				warnings := strings.Join(resp.Warnings, "\n")
				for _, w := range tc.warnings {
					if !strings.Contains(warnings, w) {
						t.Errorf("%s: warnings %q lack %q", op, warnings, w)
					}
				}
			}
		})
	}
}

func TestConfigMapValidatorOtherOperations(t *testing.T) {
	v := &ConfigMapValidator{Namespace: installNS}
	req := configMapRequest(t, admissionv1.Delete, policyConfigMap("p", map[string]string{"x.rego": "broken {"}))
	if resp := v.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("DELETE denied: %s", deniedText(resp))
	}
	req = configMapRequest(t, admissionv1.Create, policyConfigMap("p", nil))
	req.Object.Raw = []byte("{")
	if resp := v.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("undecodable ConfigMap: %+v", resp.Result)
	}
}

// With a Reader, the ConfigMap is checked within the whole operator set.
func TestConfigMapValidatorChecksTheWholeSet(t *testing.T) {
	helper := policyConfigMap("a-helpers", map[string]string{"helpers.rego": "package virtstation.lib\n\nlimit := 4\n"})
	f := newLoaderFixture(t, helper)
	v := &ConfigMapValidator{Namespace: installNS, Reader: f.client}
	uses := policyConfigMap("b-rule", map[string]string{
		"max.rego":      "package virtstation.rules.max\n\nimport data.virtstation.lib\n\ndeny contains \"too many\" if count(input.dataDisks) > lib.limit\n",
		"max_test.rego": "package virtstation.rules.max\n\ntest_limit if count(deny) == 1 with input as {\"dataDisks\": [1, 2, 3, 4, 5]}\n",
	})
	if resp := v.Handle(context.Background(), configMapRequest(t, admissionv1.Create, uses)); !resp.Allowed {
		t.Errorf("rule using another ConfigMap's module denied: %s", deniedText(resp))
	}
	alone := &ConfigMapValidator{Namespace: installNS}
	resp := alone.Handle(context.Background(), configMapRequest(t, admissionv1.Create, uses))
	if resp.Allowed || !strings.Contains(deniedText(resp), "data[max_test.rego]") {
		t.Errorf("without the other ConfigMaps: %s", deniedText(resp))
	}
	// Updating the helper so that the other ConfigMap's test fails is
	// denied, naming the other ConfigMap.
	if err := f.client.Create(context.Background(), uses); err != nil {
		t.Fatal(err)
	}
	changed := policyConfigMap("a-helpers", map[string]string{"helpers.rego": "package virtstation.lib\n\nlimit := 10\n"})
	resp = v.Handle(context.Background(), configMapRequest(t, admissionv1.Update, changed))
	if resp.Allowed || !strings.Contains(deniedText(resp), "(in ConfigMap b-rule)") {
		t.Errorf("breaking another ConfigMap's test: %s", deniedText(resp))
	}
}
