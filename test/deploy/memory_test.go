package deploy

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWebhookMemoryAndMetrics checks issue 27's deployment settings in the
// chart and in config/default: GOMEMLIMIT follows the webhook container's
// memory limit, the admission limit and the headroom are passed, /metrics
// is served over HTTPS to scrapers the metrics-reader ClusterRole lets get
// /metrics, and the webhook may review their tokens.
func TestWebhookMemoryAndMetrics(t *testing.T) {
	cases := map[string]struct {
		objs     []*unstructured.Unstructured
		wantArgs []string
	}{
		"chart": {
			objs:     renderChart(t, "webhook.maxInFlightAdmissions=8", "webhook.memoryLimitHeadroom=20"),
			wantArgs: []string{"--max-in-flight-admissions=8", "--memory-limit-headroom=20", "--metrics-secure=true"},
		},
		"config/default": {
			objs:     renderKustomize(t, "config/default"),
			wantArgs: []string{"--max-in-flight-admissions=16", "--memory-limit-headroom=10", "--metrics-secure=true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := convert[appsv1.Deployment](t, mustFind(t, tc.objs, "Deployment", "virtstation-webhook"))
			c := d.Spec.Template.Spec.Containers[0]
			for _, a := range tc.wantArgs {
				if !slices.Contains(c.Args, a) {
					t.Errorf("webhook args %v lack %s", c.Args, a)
				}
			}
			var mem *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "GOMEMLIMIT" {
					mem = &c.Env[i]
				}
			}
			if mem == nil || mem.ValueFrom == nil || mem.ValueFrom.ResourceFieldRef == nil ||
				mem.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || mem.ValueFrom.ResourceFieldRef.ContainerName != c.Name ||
				mem.ValueFrom.ResourceFieldRef.Divisor.Value() != 1 {
				t.Errorf("GOMEMLIMIT %+v, want the container's limits.memory in bytes", mem)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Error("the webhook has no memory limit for GOMEMLIMIT to follow")
			}
			role := convert[rbacv1.ClusterRole](t, mustFind(t, tc.objs, "ClusterRole", "virtstation-webhook-metrics-reader"))
			if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
				t.Errorf("metrics-reader rules %+v, want get on /metrics only", role.Rules)
			}
			webhookRole := convert[rbacv1.ClusterRole](t, mustFind(t, tc.objs, "ClusterRole", "virtstation-webhook"))
			for _, want := range [][2]string{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
				found := false
				for _, r := range webhookRole.Rules {
					found = found || (slices.Contains(r.APIGroups, want[0]) && slices.Contains(r.Resources, want[1]) && slices.Contains(r.Verbs, "create"))
				}
				if !found {
					t.Errorf("the webhook may not create %s.%s", want[1], want[0])
				}
			}
		})
	}
}

// TestWebhookServiceMonitor: the webhook's ServiceMonitor scrapes over
// HTTPS with Prometheus's token (plain HTTP with webhook.metrics.secure=
// false), and webhook.metrics.readerSubjects are bound to the
// metrics-reader role.
func TestWebhookServiceMonitor(t *testing.T) {
	cases := map[string]struct {
		values     []string
		wantScheme string
		wantBound  bool
	}{
		"secure":     {values: []string{"serviceMonitor.enabled=true"}, wantScheme: "https"},
		"plain HTTP": {values: []string{"serviceMonitor.enabled=true", "webhook.metrics.secure=false"}, wantScheme: "http"},
		"bound": {values: []string{"serviceMonitor.enabled=true", "webhook.metrics.readerSubjects[0].kind=ServiceAccount",
			"webhook.metrics.readerSubjects[0].name=prometheus-k8s", "webhook.metrics.readerSubjects[0].namespace=monitoring"}, wantScheme: "https", wantBound: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.values...)
			sm := mustFind(t, objs, "ServiceMonitor", "virtstation-webhook")
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(endpoints))
			}
			e := endpoints[0].(map[string]any)
			if e["scheme"] != tc.wantScheme || e["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
				t.Errorf("endpoint %v, want scheme %s and Prometheus's token", e, tc.wantScheme)
			}
			crb := find(objs, "ClusterRoleBinding", "virtstation-webhook-metrics-reader")
			if (crb != nil) != tc.wantBound {
				t.Fatalf("metrics-reader binding rendered: %v, want %v", crb != nil, tc.wantBound)
			}
			if crb != nil {
				b := convert[rbacv1.ClusterRoleBinding](t, crb)
				if len(b.Subjects) != 1 || b.Subjects[0].Name != "prometheus-k8s" || b.Subjects[0].Namespace != "monitoring" || b.RoleRef.Name != "virtstation-webhook-metrics-reader" {
					t.Errorf("binding %+v", b)
				}
			}
		})
	}
}
