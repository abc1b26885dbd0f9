package render_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/webhooks"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// teamPolicy denies a VM without a team label, with a message padded as
// sprintf'd or heredoc'd Rego text often is, and warns of a -tmp name.
var teamPolicy = []validate.Module{{Name: "team.rego", Source: `package virtstation.rules.team

deny contains {"id": "team", "field": "metadata.labels[team]", "message": "  a team label is required (rule: team; fix: add one)\n"} if {
	not input.object.metadata.labels.team
}

warn contains {"id": "tmp-name", "field": "metadata.name", "message": "a -tmp VM is deleted at night (rule: tmp-name; fix: none needed)"} if {
	endswith(input.object.metadata.name, "-tmp")
}
`}}

// TestRenderSaysWhatTheWebhookSays: `virtstation render` reports a policy
// denial and a policy warning word for word as the validating webhook
// answers them.
func TestRenderSaysWhatTheWebhookSays(t *testing.T) {
	ctx := context.Background()
	engine := validate.NewEngine(time.Second)
	if _, err := engine.Load(ctx, validate.Merge(validate.ShippedModules(), teamPolicy)); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(webhooks.NewScheme()).Build()
	handler := &validate.VMHandler{Engine: engine, Modes: &atomic.Pointer[policy.Modes]{}, Snapshots: validate.Snapshotter{Cache: c, API: c}}

	tests := map[string]struct {
		name         string
		labels       map[string]any
		wantDenied   string
		wantWarnings []string
	}{
		"admitted": {name: "dev", labels: map[string]any{"team": "a"}},
		"denied": {
			name:       "dev",
			wantDenied: "metadata.labels[team]: Forbidden: a team label is required (rule: team; fix: add one)",
		},
		"warned": {
			name: "dev-tmp", labels: map[string]any{"team": "a"},
			wantWarnings: []string{"virtstation policy tmp-name: metadata.name: a -tmp VM is deleted at night (rule: tmp-name; fix: none needed)"},
		},
		"denied and warned": {
			name:         "dev-tmp",
			wantDenied:   "metadata.labels[team]: Forbidden: a team label is required (rule: team; fix: add one)",
			wantWarnings: []string{"virtstation policy tmp-name: metadata.name: a -tmp VM is deleted at night (rule: tmp-name; fix: none needed)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			labels := map[string]any{"virtstation.io/managed": "true"}
			for k, v := range tc.labels {
				labels[k] = v
			}
			vm := render.Object{
				"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
				"metadata": map[string]any{"name": tc.name, "namespace": "team-a", "labels": labels},
				"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
					"domain":  map[string]any{"devices": map[string]any{"disks": []any{map[string]any{"name": "root", "disk": map[string]any{"bus": "virtio"}}}}},
					"volumes": []any{map[string]any{"name": "root", "containerDisk": map[string]any{"image": "quay.io/containerdisks/fedora:41"}}},
				}}},
			}
			verdicts, err := render.Render(ctx, render.Options{Manifests: []render.Object{vm}, Policies: engine})
			if err != nil || len(verdicts) != 1 {
				t.Fatalf("Render = %v, %v", verdicts, err)
			}
			v := verdicts[0]
			var rendered string
			if agg := v.Denied.ToAggregate(); agg != nil {
				rendered = agg.Error()
			}
			policyWarnings := slices.DeleteFunc(slices.Clone(v.Warnings), func(w string) bool { return !strings.HasPrefix(w, "virtstation policy ") })
			if rendered != tc.wantDenied || !slices.Equal(policyWarnings, tc.wantWarnings) {
				t.Errorf("render: denied %q, warnings %q; want %q, %q", rendered, policyWarnings, tc.wantDenied, tc.wantWarnings)
			}

			raw, err := json.Marshal(vm)
			if err != nil {
				t.Fatal(err)
			}
			dryRun := true
			resp := handler.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "req", Operation: admissionv1.Create, Namespace: "team-a", Name: tc.name,
				Object: runtime.RawExtension{Raw: raw}, DryRun: &dryRun,
			}})
			var webhook string
			if !resp.Allowed {
				webhook = resp.Result.Message
			}
			if webhook != rendered || !slices.Equal(resp.Warnings, policyWarnings) {
				t.Errorf("webhook: denied %q, warnings %q; render: %q, %q", webhook, resp.Warnings, rendered, policyWarnings)
			}
		})
	}
}
