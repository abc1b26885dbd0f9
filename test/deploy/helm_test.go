package deploy

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmLint runs helm lint --strict for the default values and without
// cert-manager.
func TestHelmLint(t *testing.T) {
	for name, values := range map[string][]string{"default values": nil, certManagerOff: {certManagerOff}} {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", releaseNamespace}
			for _, v := range values {
				args = append(args, "--set", v)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint: %s", out)
			}
		})
	}
}

// TestValuesSchema checks that values.schema.json refuses a misspelled or
// mistyped value instead of rendering without it.
func TestValuesSchema(t *testing.T) {
	cases := map[string]struct{ set, want string }{
		"unknown field":           {"webhook.replica=3", "additional properties 'replica' not allowed"},
		"bad duration":            {"webhook.claimGrace=2min", "claimGrace"},
		"timeout too long":        {"webhook.timeoutSeconds=60", "timeoutSeconds"},
		"unknown top level":       {"certmanager.enabled=false", "additional properties 'certmanager' not allowed"},
		"bad audit interval":      {"audit.interval=10min", "interval"},
		"unknown audit field":     {"audit.policyReports.enable=false", "additional properties 'enable' not allowed"},
		"mistyped reports switch": {"audit.openReports.enabled=yes", "enabled"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := runHelm(t, "template", releaseName, chartDir(t), "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error with %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestKubeVersion checks the chart refuses a cluster older than the APIs
// and fields it uses (the webhook's preStop sleep action is on by default
// from 1.30; TestKubeVersionCoversFeatures derives it) with a message that
// says so, and renders for 1.30.
func TestKubeVersion(t *testing.T) {
	_, err := runHelm(t, "template", releaseName, chartDir(t), "--kube-version", "1.29.15")
	if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.30.0-0") {
		t.Errorf("helm template for Kubernetes 1.29: %v, want the chart's kubeVersion named", err)
	}
	if _, err := runHelm(t, "template", releaseName, chartDir(t), "--kube-version", "1.30.0"); err != nil {
		t.Errorf("helm template for Kubernetes 1.30: %v", err)
	}
}

// TestServiceMonitor checks the optional ServiceMonitors' wiring (the
// dry-run tests apply them against prometheus-operator's CRD): each
// endpoint must name a port of a Service its selector picks.
func TestServiceMonitor(t *testing.T) {
	for _, values := range [][]string{{"serviceMonitor.enabled=true"}, {"serviceMonitor.enabled=true", certManagerOff}} {
		objs := renderChart(t, values...)
		sms := ofKind(objs, "ServiceMonitor")
		if len(sms) != 2 {
			t.Fatalf("%v: %d ServiceMonitors, want 2 (webhook, bridge)", values, len(sms))
		}
		for _, sm := range sms {
			checkServiceMonitor(t, objs, sm)
		}
	}
	if sms := ofKind(renderChart(t), "ServiceMonitor"); len(sms) != 0 {
		t.Errorf("ServiceMonitors rendered by default: %v", keys(sms))
	}
}

func checkServiceMonitor(t *testing.T, objs []*unstructured.Unstructured, sm *unstructured.Unstructured) {
	t.Helper()
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(sel) == 0 || len(endpoints) == 0 {
		t.Fatalf("%s: no selector or endpoints", key(sm))
	}
	ports := map[string]bool{}
	for _, svc := range ofKind(objs, "Service") {
		if !subset(sel, svc.GetLabels()) {
			continue
		}
		list, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range list {
			ports[p.(map[string]any)["name"].(string)] = true
		}
	}
	for _, e := range endpoints {
		port, _ := e.(map[string]any)["port"].(string)
		if !ports[port] {
			t.Errorf("%s: endpoint port %q is on none of the Services it selects (ports %v)", key(sm), port, ports)
		}
	}
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestBridgeMetricsPort checks that the bridge's /metrics is on a port of
// its own, reached through a ClusterIP Service whatever the public
// Service's type, and is off with bridge.metrics.enabled=false; and that
// bridge.metrics.readerSubjects are bound to the metrics-reader role.
func TestBridgeMetricsPort(t *testing.T) {
	cases := map[string]struct {
		values      []string
		wantArgs    []string
		wantService bool
		wantBinding []string // subjects of the metrics-reader binding
	}{
		"default": {
			values:      []string{"bridge.service.type=LoadBalancer", "serviceMonitor.enabled=true"},
			wantArgs:    []string{"--metrics-bind-address=:8080", "--metrics-secure=true"},
			wantService: true,
		},
		"plain HTTP on another port, a Prometheus bound": {
			values: []string{"bridge.metrics.port=9090", "bridge.metrics.secure=false", "serviceMonitor.enabled=true",
				"bridge.metrics.readerSubjects[0].kind=ServiceAccount", "bridge.metrics.readerSubjects[0].name=prometheus-k8s",
				"bridge.metrics.readerSubjects[0].namespace=monitoring"},
			wantArgs:    []string{"--metrics-bind-address=:9090", "--metrics-secure=false"},
			wantService: true,
			wantBinding: []string{"ServiceAccount monitoring/prometheus-k8s"},
		},
		"off": {
			values:   []string{"bridge.metrics.enabled=false", "serviceMonitor.enabled=true"},
			wantArgs: []string{"--metrics-bind-address=0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.values...)
			byName := map[string]*unstructured.Unstructured{}
			for _, u := range objs {
				byName[key(u)] = u
			}
			d := byName["Deployment "+releaseNamespace+"/virtstation-bridge"]
			if d == nil {
				t.Fatal("no bridge Deployment")
			}
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			for _, w := range tc.wantArgs {
				if !slices.Contains(args, w) {
					t.Errorf("bridge args %v lack %s", args, w)
				}
			}
			public := byName["Service "+releaseNamespace+"/virtstation-bridge"]
			ports, _, _ := unstructured.NestedSlice(public.Object, "spec", "ports")
			for _, p := range ports {
				if p.(map[string]any)["name"] == "metrics" {
					t.Errorf("the public Service has a metrics port: %v", ports)
				}
			}
			svc := byName["Service "+releaseNamespace+"/virtstation-bridge-metrics"]
			if (svc != nil) != tc.wantService {
				t.Fatalf("metrics Service rendered: %v, want %v", svc != nil, tc.wantService)
			}
			if svc != nil {
				if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "ClusterIP" {
					t.Errorf("the metrics Service is %s, want ClusterIP", typ)
				}
			}
			if sm := byName["ServiceMonitor "+releaseNamespace+"/virtstation-bridge"]; (sm != nil) != tc.wantService {
				t.Errorf("bridge ServiceMonitor rendered: %v, want %v", sm != nil, tc.wantService)
			} else if sm != nil {
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				if tok, _ := eps[0].(map[string]any)["bearerTokenFile"].(string); tok == "" {
					t.Errorf("the bridge ServiceMonitor sends no bearer token: %v", eps[0])
				}
			}
			if byName["ClusterRole virtstation-bridge-metrics-reader"] == nil {
				t.Error("no ClusterRole virtstation-bridge-metrics-reader")
			}
			crb := byName["ClusterRoleBinding virtstation-bridge-metrics-reader"]
			var got []string
			if crb != nil {
				for _, s := range convert[rbacv1.ClusterRoleBinding](t, crb).Subjects {
					got = append(got, s.Kind+" "+s.Namespace+"/"+s.Name)
				}
			}
			if !slices.Equal(got, tc.wantBinding) {
				t.Errorf("metrics-reader binding subjects %v, want %v", got, tc.wantBinding)
			}
		})
	}
}
