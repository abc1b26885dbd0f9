package policyreport

import (
	"encoding/json"
	"fmt"
	"reflect"

	orv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The report kinds Virtstation writes.
var (
	// WGPolicy is the PolicyReport Kyverno and Policy Reporter read.
	WGPolicy = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}
	// OpenReports is its successor.
	OpenReports = schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"}
)

// Labels every report carries.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "virtstation"
)

// Object is the report as an object of kind gvk (WGPolicy or OpenReports),
// labelled as Virtstation's.
func Object(r Report, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content := map[string]any{}
	if err := toMap(struct {
		Summary orv1alpha1.ReportSummary `json:"summary"`
		Results []Result                 `json:"results,omitempty"`
	}{r.Summary, r.Results}, &content); err != nil {
		return nil, fmt.Errorf("encode report %s/%s: %w", r.Namespace, r.Name, err)
	}
	if gvk == OpenReports {
		content["source"] = Source
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(r.Namespace)
	u.SetName(r.Name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedBy})
	return u, nil
}

// FromObject reads a report's content back from an object of either kind.
func FromObject(u *unstructured.Unstructured) (Report, error) {
	var content struct {
		Summary orv1alpha1.ReportSummary `json:"summary"`
		Results []Result                 `json:"results"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &content); err != nil {
		return Report{}, fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return Report{Namespace: u.GetNamespace(), Name: u.GetName(), Results: content.Results, Summary: content.Summary}, nil
}

// Equal reports whether two reports say the same: same results (with their
// timestamps) and summary.
func Equal(a, b Report) bool {
	if a.Namespace != b.Namespace || a.Name != b.Name || a.Summary != b.Summary || len(a.Results) != len(b.Results) {
		return false
	}
	for i := range a.Results {
		if !equalResult(a.Results[i], b.Results[i]) {
			return false
		}
	}
	return true
}

func equalResult(a, b Result) bool {
	if !sameOutcome(a, b) || a.Timestamp != b.Timestamp || a.Rule != b.Rule {
		return false
	}
	// nil and empty compare equal: the API server drops empty lists.
	if len(a.Subjects) != len(b.Subjects) {
		return false
	}
	return len(a.Subjects) == 0 || reflect.DeepEqual(a.Subjects, b.Subjects)
}

func toMap(v any, out *map[string]any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
