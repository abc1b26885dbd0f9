package mutate

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Paths into a VirtualMachine's JSON object, as unstructured field lists.
var (
	pathInterfaces  = []string{"spec", "template", "spec", "domain", "devices", "interfaces"}
	pathNetworks    = []string{"spec", "template", "spec", "networks"}
	pathAnnotations = []string{"metadata", "annotations"}
)

// getList returns a copy of the list at path, or nil when it is absent or not
// a list.
func getList(obj map[string]any, path []string) []any {
	l, found, err := unstructured.NestedSlice(obj, path...)
	if !found || err != nil {
		return nil
	}
	return l
}

// setList writes l at path, creating the parent objects.
func setList(obj map[string]any, l []any, path []string) error {
	return unstructured.SetNestedSlice(obj, l, path...)
}

// setAnnotation sets or, for an empty value, removes one annotation.
func setAnnotation(obj map[string]any, key, value string) error {
	ann, _, err := unstructured.NestedStringMap(obj, pathAnnotations...)
	if err != nil {
		return err
	}
	if value == "" {
		if _, ok := ann[key]; !ok {
			return nil
		}
		delete(ann, key)
	} else {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[key] = value
	}
	if len(ann) == 0 {
		unstructured.RemoveNestedField(obj, pathAnnotations...)
		return nil
	}
	return unstructured.SetNestedStringMap(obj, ann, pathAnnotations...)
}
