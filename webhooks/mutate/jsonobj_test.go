package mutate

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Helpers for the tests that build and read VMs as JSON objects.

// Paths into a VirtualMachine's JSON object.
var (
	pathInterfaces  = []string{"spec", "template", "spec", "domain", "devices", "interfaces"}
	pathNetworks    = []string{"spec", "template", "spec", "networks"}
	pathAnnotations = []string{"metadata", "annotations"}
)

// asObject is obj as a JSON object: a map as is, raw JSON decoded.
func asObject(obj any) map[string]any {
	switch o := obj.(type) {
	case map[string]any:
		return o
	case json.RawMessage:
		var out map[string]any
		if err := json.Unmarshal(o, &out); err != nil {
			panic(fmt.Sprintf("not a JSON object: %v", err))
		}
		return out
	}
	panic(fmt.Sprintf("not a JSON object: %T", obj))
}

// getList returns a copy of the list at path, or nil when it is absent or
// not a list.
func getList(obj any, path []string) []any {
	l, found, err := unstructured.NestedSlice(asObject(obj), path...)
	if !found || err != nil {
		return nil
	}
	return l
}

// getMap returns the object at path, or nil.
func getMap(obj any, path []string) (map[string]any, bool) {
	m, found, err := unstructured.NestedMap(asObject(obj), path...)
	return m, found && err == nil
}

// setList writes l at path, creating the parent objects.
func setList(obj map[string]any, l []any, path []string) error {
	if err := unstructured.SetNestedSlice(obj, l, path...); err != nil {
		return fmt.Errorf(".%s: %w", strings.Join(path, "."), err)
	}
	return nil
}

// deepCopyJSON copies a decoded JSON object.
func deepCopyJSON(v any) map[string]any {
	return (&unstructured.Unstructured{Object: asObject(v)}).DeepCopy().Object
}

// decodeInput reads the request's object (and old object on UPDATE), as
// Handle does.
func decodeInput(req admission.Request) (Input, error) {
	return decodeRequest((&Handler{}).request(req))
}
