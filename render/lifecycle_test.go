package render

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/api"
)

// TestRenderLifecycle: render judges a keep-running lease with the
// namespace's lifecycle ConfigMap among the objects, as the webhook does,
// and drops the lifecycle controller's annotations from a new VM.
func TestRenderLifecycle(t *testing.T) {
	lease := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
	cm := Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": api.LifecycleConfigMap, "namespace": "team-a"},
		"data":     map[string]any{api.LifecycleKeyMaxKeepRunning: "1h"}}
	tests := map[string]struct {
		cluster      []Object
		ann          map[string]any
		wantDenied   string
		wantWarnings []string
	}{
		"the built-in 8h": {ann: map[string]any{api.AnnotationKeepRunningUntil: lease}},
		"the namespace's 1h": {
			cluster:    []Object{cm},
			ann:        map[string]any{api.AnnotationKeepRunningUntil: lease},
			wantDenied: "at most max-keep-running (1h0m0s) from now",
		},
		"the VM's own over the namespace's": {
			cluster: []Object{cm},
			ann:     map[string]any{api.AnnotationKeepRunningUntil: lease, api.AnnotationMaxKeepRunning: "4h"},
		},
		"the controller's record dropped": {
			ann:          map[string]any{api.AnnotationIdleStop: `{"action":"stopped"}`},
			wantWarnings: []string{api.AnnotationIdleStop + " is written by the lifecycle controller only: it is removed"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm := Object{
				"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "dev", "namespace": "team-a", "annotations": tc.ann,
					"labels": map[string]any{api.LabelManaged: api.LabelTrue}},
				"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
					"domain": map[string]any{"devices": map[string]any{}},
				}}},
			}
			verdicts, err := Render(context.Background(), Options{Cluster: tc.cluster, Manifests: []Object{vm}})
			if err != nil {
				t.Fatal(err)
			}
			v := verdicts[0]
			if got := v.Denied.ToAggregate(); (got == nil) != (tc.wantDenied == "") || got != nil && !strings.Contains(got.Error(), tc.wantDenied) {
				t.Errorf("denied %v, want %q", got, tc.wantDenied)
			}
			for _, w := range tc.wantWarnings {
				if !strings.Contains(strings.Join(v.Warnings, "\n"), w) {
					t.Errorf("warnings %q, want %q", v.Warnings, w)
				}
			}
			if tc.wantDenied == "" {
				md, _ := v.Object["metadata"].(map[string]any)
				ann, _ := md["annotations"].(map[string]any)
				if _, ok := ann[api.AnnotationIdleStop]; ok {
					t.Errorf("admitted with %s", api.AnnotationIdleStop)
				}
			}
		})
	}
}
