package deploy

import (
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
)

// TestRBACInSync checks that the chart and config/ grant the same rules to
// the same subjects: the chart with cert-manager against config/default,
// and the chart without it against config/default plus
// config/rbac/webhook_certs_role.yaml. config/ grants the rules of both
// report APIs unconditionally, the chart only those of the reports it is
// told to write, so the chart is rendered with both on. Rules are compared
// one (group, resource, verb, name) at a time, so grouping does not
// matter, only what is granted.
func TestRBACInSync(t *testing.T) {
	config := renderKustomize(t, "config/default")
	certs := readManifests(t, "config/rbac/webhook_certs_role.yaml")
	cases := map[string]struct {
		chart, config []*unstructured.Unstructured
	}{
		"certManager.enabled=true vs config/default": {
			chart: renderChart(t, openReportsOn), config: config,
		},
		"certManager.enabled=false vs config/default + config/rbac/webhook_certs_role.yaml": {
			chart: renderChart(t, certManagerOff, openReportsOn), config: append(slices.Clone(config), certs...),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chart, cfg := rbacOf(t, tc.chart), rbacOf(t, tc.config)
			if len(chart) == 0 {
				t.Fatal("the chart renders no RBAC")
			}
			if report := compareRBAC(chart, cfg); report != "" {
				t.Errorf("the chart and config/ grant different RBAC (- chart, + config/):\n%s", report)
			}
		})
	}
}

// grant is one atomic permission: a verb on a resource (or URL) of a
// group, optionally of one named object.
type grant string

// rbacOf maps each Role, ClusterRole and binding to what it grants or binds,
// normalized and sorted.
func rbacOf(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Role", "ClusterRole":
			var gs []string
			for _, r := range convert[rbacv1.ClusterRole](t, u).Rules {
				for _, g := range expand(r) {
					gs = append(gs, string(g))
				}
			}
			if u.GetKind() == "ClusterRole" && convert[rbacv1.ClusterRole](t, u).AggregationRule != nil {
				gs = append(gs, "aggregationRule")
			}
			slices.Sort(gs)
			out[key(u)] = slices.Compact(gs)
		case "RoleBinding", "ClusterRoleBinding":
			b := convert[rbacv1.RoleBinding](t, u)
			bs := []string{"roleRef " + b.RoleRef.Kind + " " + b.RoleRef.Name}
			for _, s := range b.Subjects {
				bs = append(bs, "subject "+s.Kind+" "+s.Namespace+"/"+s.Name)
			}
			slices.Sort(bs)
			out[key(u)] = bs
		}
	}
	return out
}

// expand splits a rule into its atomic grants.
func expand(r rbacv1.PolicyRule) []grant {
	var out []grant
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{"*any*"}
	}
	for _, verb := range r.Verbs {
		for _, url := range r.NonResourceURLs {
			out = append(out, grant(fmt.Sprintf("%-8s url %s", verb, url)))
		}
		for _, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			for _, res := range r.Resources {
				for _, n := range names {
					out = append(out, grant(fmt.Sprintf("%-8s %s/%s name=%s", verb, g, res, n)))
				}
			}
		}
	}
	return out
}

// compareRBAC returns a readable report of what differs, or "".
func compareRBAC(chart, config map[string][]string) string {
	var names []string
	for k := range chart {
		names = append(names, k)
	}
	for k := range config {
		if _, ok := chart[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		c, inChart := chart[n]
		f, inConfig := config[n]
		switch {
		case !inConfig:
			fmt.Fprintf(&b, "%s: only in the chart\n", n)
		case !inChart:
			fmt.Fprintf(&b, "%s: only in config/\n", n)
		case !slices.Equal(c, f):
			fmt.Fprintf(&b, "%s:\n", n)
			for _, g := range c {
				if !slices.Contains(f, g) {
					fmt.Fprintf(&b, "  - %s\n", g)
				}
			}
			for _, g := range f {
				if !slices.Contains(c, g) {
					fmt.Fprintf(&b, "  + %s\n", g)
				}
			}
		}
	}
	return b.String()
}

// TestChartWebhooksMatchGenerated checks that the chart's webhooks are the
// ones the +kubebuilder:webhook markers generate (config/webhook/
// manifests.yaml): same names, paths, rules, selectors, side effects,
// timeouts and failure policies. A marker changed without the chart fails
// here.
func TestChartWebhooksMatchGenerated(t *testing.T) {
	generated := readManifests(t, "config/webhook/manifests.yaml")
	for _, values := range [][]string{nil, {certManagerOff}} {
		t.Run(fmt.Sprintf("values %v", values), func(t *testing.T) {
			chart := renderChart(t, values...)
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				gen := ofKind(generated, kind)
				ch := ofKind(chart, kind)
				if len(gen) != 1 || len(ch) != 1 {
					t.Fatalf("%s: %d generated, %d in the chart, want 1 each", kind, len(gen), len(ch))
				}
				if gen[0].GetName() != ch[0].GetName() {
					t.Errorf("%s: named %q in the chart, %q generated", kind, ch[0].GetName(), gen[0].GetName())
				}
				want, got := webhooksByName(t, gen[0]), webhooksByName(t, ch[0])
				if d := diff.Diff(want, got); !equalJSON(want, got) {
					t.Errorf("%s: the chart's webhooks differ from config/webhook/manifests.yaml (- generated, + chart):\n%s", kind, d)
				}
			}
		})
	}
}

func webhooksByName(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
	if err != nil {
		t.Fatalf("%s: %v", key(u), err)
	}
	out := map[string]any{}
	for _, h := range hooks {
		m := h.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// equalJSON compares two decoded JSON values.
func equalJSON(a, b any) bool { return reflect.DeepEqual(a, b) }

// TestKustomizeMatchesChart checks that config/default installs the same
// objects as the chart with its default values: same kinds and names, and
// the same content once labels and label selectors (which follow each
// tool's conventions) are set aside. The Namespace is config/default's
// own: Helm creates it with --create-namespace. The PolicyReport CRD the
// chart installs when the cluster has none is the chart's alone (config/
// installs no CRDs), so the chart is rendered without it. config/ grants
// the openreports.io rules even while --open-reports is off, so the
// webhook's ClusterRole is the chart's with Reports on.
func TestKustomizeMatchesChart(t *testing.T) {
	noCRD := "audit.policyReports.installCRD=false"
	chart := normalized(t, renderChart(t, noCRD))
	role := "ClusterRole virtstation-webhook"
	chart[role] = normalized(t, renderChart(t, noCRD, openReportsOn, "audit.openReports.installCRD=false"))[role]
	config := normalized(t, renderKustomize(t, "config/default"))
	if _, ok := config["Namespace "+releaseNamespace]; !ok {
		t.Errorf("config/default does not create namespace %s", releaseNamespace)
	}
	delete(config, "Namespace "+releaseNamespace)
	var names []string
	for k := range chart {
		names = append(names, k)
	}
	for k := range config {
		if _, ok := chart[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		c, inChart := chart[n]
		f, inConfig := config[n]
		switch {
		case !inConfig:
			t.Errorf("%s: only in the chart", n)
		case !inChart:
			t.Errorf("%s: only in config/default", n)
		case !equalJSON(c, f):
			t.Errorf("%s differs (- chart, + config/default):\n%s", n, diff.Diff(c, f))
		}
	}
}

// normalized maps objects by kind and name, without what legitimately
// differs between the chart and kustomize: labels and the label selectors
// built from them, and annotations other than cert-manager's.
func normalized(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		o := u.DeepCopy()
		unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		ann := map[string]string{}
		if v, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			ann["cert-manager.io/inject-ca-from"] = v
		}
		o.SetAnnotations(ann)
		switch o.GetKind() {
		case "Deployment":
			unstructured.RemoveNestedField(o.Object, "spec", "selector")
			unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata")
			unstructured.RemoveNestedField(o.Object, "spec", "template", "spec", "affinity")
		case "PodDisruptionBudget", "Service":
			unstructured.RemoveNestedField(o.Object, "spec", "selector")
		}
		k := key(o)
		if _, dup := out[k]; dup {
			t.Fatalf("%s rendered twice", k)
		}
		out[k] = o.Object
	}
	return out
}

// TestKubectlKustomize checks that `kubectl kustomize config/default`
// renders what the tests check (kustomize's krusty, built in), when kubectl
// is installed.
func TestKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed; config/default is rendered with krusty only")
	}
	out, err := command(repoRoot(t), nil, kubectl, "kustomize", "config/default")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(objs)
	want := byKey(renderKustomize(t, "config/default"))
	if !equalJSON(got, want) {
		t.Errorf("kubectl kustomize and krusty render config/default differently (- krusty, + kubectl):\n%s", diff.Diff(want, got))
	}
}

// byKey maps objects by kind and name.
func byKey(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, u := range objs {
		out[key(u)] = u.Object
	}
	return out
}
