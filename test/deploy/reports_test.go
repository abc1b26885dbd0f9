package deploy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The report CRDs the chart can install, by name, and the upstream files
// it renders them from.
const (
	policyReportCRD = "policyreports.wgpolicyk8s.io"
	openReportCRD   = "reports.openreports.io"
)

var reportCRDFiles = map[string]string{
	policyReportCRD: "files/crds/wgpolicyk8s.io_policyreports.yaml",
	openReportCRD:   "files/crds/openreports.io_reports.yaml",
}

// The webhook's ClusterRole grants on the two report APIs.
var (
	policyReportGrants = reportGrants("wgpolicyk8s.io", "policyreports")
	openReportGrants   = reportGrants("openreports.io", "reports")
)

// reportGrants are the sorted grants the webhook needs on one report API.
func reportGrants(group, resource string) []string {
	var out []string
	for _, g := range expand(rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{resource},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
	}) {
		out = append(out, string(g))
	}
	slices.Sort(out)
	return out
}

// TestAuditValues checks what each audit value changes in the rendered
// chart: the webhook's flags, its RBAC on the report APIs and the CRDs
// installed.
func TestAuditValues(t *testing.T) {
	cases := map[string]struct {
		values     []string
		wantArgs   []string
		wantGrants []string // on the report APIs, sorted
		wantCRDs   []string // report CRDs rendered, sorted
	}{
		"defaults: PolicyReports and their CRD": {
			wantArgs:   []string{"--audit-interval=10m", "--policy-reports=true", "--open-reports=false"},
			wantGrants: policyReportGrants,
			wantCRDs:   []string{policyReportCRD},
		},
		"reports off: no grants, no CRD, the audit still runs": {
			values:   []string{"audit.policyReports.enabled=false", "audit.interval=1h"},
			wantArgs: []string{"--audit-interval=1h", "--policy-reports=false", "--open-reports=false"},
		},
		"PolicyReports without installing their CRD": {
			values:     []string{"audit.policyReports.installCRD=false"},
			wantArgs:   []string{"--policy-reports=true"},
			wantGrants: policyReportGrants,
		},
		"Reports too": {
			values:     []string{openReportsOn},
			wantArgs:   []string{"--policy-reports=true", "--open-reports=true"},
			wantGrants: slices.Sorted(slices.Values(append(slices.Clone(policyReportGrants), openReportGrants...))),
			wantCRDs:   []string{policyReportCRD, openReportCRD},
		},
		"Reports only, their CRD installed elsewhere": {
			values:     []string{"audit.policyReports.enabled=false", openReportsOn, "audit.openReports.installCRD=false"},
			wantArgs:   []string{"--policy-reports=false", "--open-reports=true"},
			wantGrants: openReportGrants,
		},
		"openReports.installCRD without openReports.enabled": {
			values:     []string{"audit.openReports.installCRD=true"},
			wantArgs:   []string{"--open-reports=false"},
			wantGrants: policyReportGrants,
			wantCRDs:   []string{policyReportCRD},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.values...)
			d := mustFind(t, objs, "Deployment", "virtstation-webhook")
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			for _, w := range tc.wantArgs {
				if !slices.Contains(args, w) {
					t.Errorf("webhook args %v lack %s", args, w)
				}
			}
			var grants []string
			for _, g := range rbacOf(t, objs)["ClusterRole virtstation-webhook"] {
				if strings.Contains(g, "wgpolicyk8s.io/") || strings.Contains(g, "openreports.io/") {
					grants = append(grants, g)
				}
			}
			if !slices.Equal(grants, tc.wantGrants) {
				t.Errorf("webhook ClusterRole grants on the report APIs:\n%s\nwant:\n%s", strings.Join(grants, "\n"), strings.Join(tc.wantGrants, "\n"))
			}
			var crds []string
			for _, u := range ofKind(objs, "CustomResourceDefinition") {
				crds = append(crds, u.GetName())
			}
			slices.Sort(crds)
			if want := slices.Sorted(slices.Values(tc.wantCRDs)); !slices.Equal(crds, want) {
				t.Errorf("CRDs rendered: %v, want %v", crds, want)
			}
		})
	}
}

// TestReportCRDsAreUpstream checks that the chart installs the upstream
// CRDs unchanged (same spec as the files Kyverno and reports-api ship),
// annotated so that uninstalling the chart never deletes them.
func TestReportCRDsAreUpstream(t *testing.T) {
	objs := renderChart(t, openReportsOn)
	for name, file := range reportCRDFiles {
		t.Run(name, func(t *testing.T) {
			got := mustFind(t, objs, "CustomResourceDefinition", name)
			b, err := os.ReadFile(filepath.Join(chartDir(t), file))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := yaml.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !reflect.DeepEqual(got.Object["spec"], want["spec"]) {
				t.Errorf("the rendered %s has another spec than %s", name, file)
			}
			if p := got.GetAnnotations()["helm.sh/resource-policy"]; p != "keep" {
				t.Errorf("%s: helm.sh/resource-policy %q, want keep (uninstall would delete every tool's reports)", name, p)
			}
			for k, v := range want["metadata"].(map[string]any)["annotations"].(map[string]any) {
				if got.GetAnnotations()[k] != v {
					t.Errorf("%s: annotation %s=%q, want upstream's %q", name, k, got.GetAnnotations()[k], v)
				}
			}
		})
	}
}

// TestReportCRDWhenMissing runs `helm install --dry-run=server` (lookup
// sees the cluster) with openreports.io Reports on, for each state the
// cluster's reports.openreports.io can be in: the chart installs the CRD
// when there is none, keeps rendering it when this release installed it
// (an upgrade must not drop it), and leaves alone one another tool
// installed, without a conflict that would fail the install.
func TestReportCRDWhenMissing(t *testing.T) {
	cfg := controlPlane(t).Config
	kubeconfig := writeKubeconfig(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	original, err := crds.Get(context.Background(), openReportCRD, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { // back to the CRD the package's tests started with
		ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
		defer cancel()
		setCRD(ctx, t, crds, nil)
		if original != nil {
			restored := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": original.GetAPIVersion(), "kind": original.GetKind(), "spec": original.Object["spec"],
				"metadata": map[string]any{"name": original.GetName(), "annotations": original.GetAnnotations(), "labels": original.GetLabels()},
			}}
			if _, err := crds.Create(ctx, restored, metav1.CreateOptions{}); err != nil {
				t.Errorf("restore %s: %v", openReportCRD, err)
			}
		}
	})
	// What Helm writes on the objects of a release it installed.
	byThisRelease := map[string]string{
		"meta.helm.sh/release-name": releaseName, "meta.helm.sh/release-namespace": releaseNamespace,
		"app.kubernetes.io/managed-by": "Helm",
	}
	cases := []struct {
		name        string
		annotations map[string]string // of the CRD in the cluster (app.kubernetes.io/managed-by is a label); nil: no CRD
		want        bool
	}{
		{name: "no CRD: installed", want: true},
		{name: "installed by another tool: left alone", annotations: map[string]string{}},
		{name: "installed by another release: left alone", annotations: map[string]string{
			"meta.helm.sh/release-name": "kyverno", "meta.helm.sh/release-namespace": "kyverno",
		}},
		{name: "same release name in another namespace: left alone", annotations: map[string]string{
			"meta.helm.sh/release-name": releaseName, "meta.helm.sh/release-namespace": "elsewhere",
		}},
		{name: "installed by this release: kept", annotations: byThisRelease, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
			defer cancel()
			setCRD(ctx, t, crds, tc.annotations)
			out, err := runHelm(t, "install", releaseName, chartDir(t), "--namespace", releaseNamespace,
				"--dry-run=server", "--kubeconfig", kubeconfig, "--set", openReportsOn)
			if err != nil {
				t.Fatal(err)
			}
			_, manifest, _ := strings.Cut(out, "\nMANIFEST:\n")
			manifest, _, _ = strings.Cut(manifest, "\nNOTES:\n")
			objs, err := decodeObjects([]byte(manifest))
			if err != nil {
				t.Fatal(err)
			}
			if got := find(objs, "CustomResourceDefinition", openReportCRD) != nil; got != tc.want {
				t.Errorf("%s rendered: %v, want %v", openReportCRD, got, tc.want)
			}
		})
	}
}

// setCRD makes the cluster's reports.openreports.io the upstream CRD with
// these annotations (app.kubernetes.io/managed-by as a label), or removes
// it when annotations is nil.
func setCRD(ctx context.Context, t *testing.T, crds dynamic.NamespaceableResourceInterface, annotations map[string]string) {
	t.Helper()
	if annotations == nil {
		err := crds.Delete(ctx, openReportCRD, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := crds.Get(ctx, openReportCRD, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("%s not deleted: %v", openReportCRD, err)
		}
		return
	}
	b, err := os.ReadFile(filepath.Join(chartDir(t), reportCRDFiles[openReportCRD]))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	ann, labels := map[string]string{}, map[string]string{}
	for k, v := range annotations {
		if k == "app.kubernetes.io/managed-by" {
			labels[k] = v
		} else {
			ann[k] = v
		}
	}
	existing, err := crds.Get(ctx, openReportCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		u.SetAnnotations(ann)
		u.SetLabels(labels)
		_, err = crds.Create(ctx, u, metav1.CreateOptions{})
	case err == nil:
		existing.SetAnnotations(ann)
		existing.SetLabels(labels)
		_, err = crds.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}
