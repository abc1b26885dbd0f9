package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReportCRDCopiesMatch checks that the chart's and the kustomize
// component's copies of the report CRDs are the ones the tests install:
// internal/testenv/crds, which hack/verify-generated.sh regenerates from
// the Kyverno and reports-api modules.
func TestReportCRDCopiesMatch(t *testing.T) {
	root := repoRoot(t)
	copies := map[string]string{
		"charts/virtstation/files/crds/wgpolicyk8s.io_policyreports.yaml":        "wgpolicyk8s.io_policyreports.yaml",
		"charts/virtstation/files/crds/openreports.io_reports.yaml":              "openreports.io_reports.yaml",
		"config/components/policy-reports-crd/wgpolicyk8s.io_policyreports.yaml": "wgpolicyk8s.io_policyreports.yaml",
	}
	for copy, generated := range copies {
		t.Run(copy, func(t *testing.T) {
			got, want := readYAML(t, filepath.Join(root, copy)), readYAML(t, filepath.Join(root, "internal", "testenv", "crds", generated))
			if got["spec"] == nil || want["spec"] == nil {
				t.Fatalf("%s or %s holds no CRD", copy, generated)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s differs from internal/testenv/crds/%s: copy the regenerated CRD over it", copy, generated)
			}
		})
	}
}

// TestPolicyReportsComponent renders config/default with the
// policy-reports-crd component, as an operator's overlay would: the
// installation gains the PolicyReport CRD.
func TestPolicyReportsComponent(t *testing.T) {
	objs := renderOverlay(t, "policy-reports-crd")
	crd := mustFind(t, objs, "CustomResourceDefinition", policyReportCRD)
	want := readYAML(t, filepath.Join(repoRoot(t), "internal", "testenv", "crds", "wgpolicyk8s.io_policyreports.yaml"))
	if !reflect.DeepEqual(crd.Object["spec"], want["spec"]) {
		t.Errorf("the component's %s has another spec than the generated one", policyReportCRD)
	}
	if len(objs) != len(renderKustomize(t, "config/default"))+1 {
		t.Errorf("the component adds %d objects, want the CRD alone", len(objs)-len(renderKustomize(t, "config/default")))
	}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}
