package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// apiVersionSince is the oldest Kubernetes minor release (1.x) that serves
// each apiVersion the manifests use. CRD-backed APIs (cert-manager,
// Prometheus Operator, reports) depend on their CRDs, not on Kubernetes:
// they are 0. A new apiVersion in the chart must be added here.
var apiVersionSince = map[string]int{
	"v1":                              0,
	"apps/v1":                         9,
	"rbac.authorization.k8s.io/v1":    8,
	"admissionregistration.k8s.io/v1": 16,
	"apiextensions.k8s.io/v1":         16,
	"networking.k8s.io/v1":            19,
	"policy/v1":                       21,
	"flowcontrol.apiserver.k8s.io/v1": 29,
	"cert-manager.io/v1":              0,
	"monitoring.coreos.com/v1":        0,
}

// fieldFeature is a field of a served API that only later releases accept
// or act on, with the oldest minor release where it is on by default.
type fieldFeature struct {
	since int
	// source says where the version comes from.
	source string
	uses   func(u *unstructured.Unstructured) bool
}

var fieldFeatures = map[string]fieldFeature{
	"lifecycle preStop sleep action": {
		since:  30,
		source: "KEP-3960 PodLifecycleSleepAction: alpha 1.29 (off by default: the API server drops the field and refuses the handler), beta and on by default 1.30, GA 1.34",
		uses:   func(u *unstructured.Unstructured) bool { return containerHas(u, "lifecycle", "preStop", "sleep") },
	},
	"sleep action of zero seconds": {
		since:  33,
		source: "KEP-4818 PodLifecycleSleepActionAllowZero: alpha 1.32, beta and on by default 1.33",
		uses: func(u *unstructured.Unstructured) bool {
			for _, s := range containerField(u, "lifecycle", "preStop", "sleep", "seconds") {
				if n, ok := s.(int64); ok && n == 0 {
					return true
				}
			}
			return false
		},
	},
	"webhook matchConditions": {
		since:  28,
		source: "KEP-3716 AdmissionWebhookMatchConditions: beta and on by default 1.28, GA 1.30",
		uses: func(u *unstructured.Unstructured) bool {
			return strings.Contains(mustJSON(u.Object["webhooks"]), `"matchConditions"`)
		},
	},
	"CEL optional field selection (.?) in matchConditions": {
		since:  28,
		source: "the API server's base CEL environment has cel.OptionalTypes from 1.28",
		uses:   func(u *unstructured.Unstructured) bool { return strings.Contains(mustJSON(u.Object["webhooks"]), ".?") },
	},
	"kubernetes.io/metadata.name namespace label": {
		since:  22,
		source: "NamespaceDefaultLabelName: GA 1.22",
		uses: func(u *unstructured.Unstructured) bool {
			return strings.Contains(mustJSON(u.Object), "kubernetes.io/metadata.name")
		},
	},
	"CRD x-kubernetes-validations": {
		since:  25,
		source: "CustomResourceValidationExpressions: beta and on by default 1.25",
		uses: func(u *unstructured.Unstructured) bool {
			return strings.Contains(mustJSON(u.Object), "x-kubernetes-validations")
		},
	},
}

// TestKubeVersionCoversFeatures checks that the chart's kubeVersion is the
// oldest release that serves every API and field its rendered objects use,
// in every configuration: not lower (an install that fails, or a pod that
// silently loses its preStop hook) and not higher (a refusal a cluster
// does not deserve).
func TestKubeVersionCoversFeatures(t *testing.T) {
	claimed := chartKubeMinor(t)
	need, because := 0, "nothing"
	for _, values := range [][]string{nil, {certManagerOff}, {openReportsOn, "networkPolicy.enabled=true", "serviceMonitor.enabled=true"}, {"webhook.hostNetwork=true"}} {
		for _, u := range renderChart(t, values...) {
			since, ok := apiVersionSince[u.GetAPIVersion()]
			if !ok {
				t.Errorf("%s: apiVersion %s is not in apiVersionSince: add the release that first serves it", key(u), u.GetAPIVersion())
			}
			if since > need {
				need, because = since, u.GetAPIVersion()+" ("+key(u)+")"
			}
			for name, f := range fieldFeatures {
				if f.uses(u) && f.since > need {
					need, because = f.since, name+" in "+key(u)+": "+f.source
				}
			}
		}
	}
	if claimed != need {
		t.Errorf("Chart.yaml kubeVersion claims >=1.%d, the manifests need 1.%d: %s", claimed, need, because)
	}
}

// chartKubeMinor reads the minor release of Chart.yaml's kubeVersion,
// which must be of the form ">=1.N.0-0".
func chartKubeMinor(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^>=1\.(\d+)\.0-0$`).FindStringSubmatch(chart.KubeVersion)
	if m == nil {
		t.Fatalf("kubeVersion %q is not of the form >=1.N.0-0", chart.KubeVersion)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// containerField collects a field of every container of a Deployment's pod
// template.
func containerField(u *unstructured.Unstructured, path ...string) []any {
	if u.GetKind() != "Deployment" {
		return nil
	}
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	var out []any
	for _, c := range cs {
		if v, ok, _ := unstructured.NestedFieldNoCopy(c.(map[string]any), path...); ok {
			out = append(out, v)
		}
	}
	return out
}

func containerHas(u *unstructured.Unstructured, path ...string) bool {
	return len(containerField(u, path...)) > 0
}

// mustJSON is v as JSON, for searching rendered objects; v came from YAML,
// so it always marshals, and a failure is shown in its place.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("marshal: %v", err)
	}
	return string(b)
}
