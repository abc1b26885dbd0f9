package mutate

import (
	"fmt"
	"strings"

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

// setList writes l at path, creating the parent objects (a JSON null on the
// way counts as absent).
func setList(obj map[string]any, l []any, path []string) error {
	parent, err := ensureObject(obj, path[:len(path)-1])
	if err != nil {
		return err
	}
	parent[path[len(path)-1]] = l
	return nil
}

// ensureObject returns the object at path, creating it and any missing or
// null parents. It fails when something other than an object is in the way.
func ensureObject(obj map[string]any, path []string) (map[string]any, error) {
	cur := obj
	for i, k := range path {
		switch v := cur[k].(type) {
		case map[string]any:
			cur = v
		case nil:
			next := map[string]any{}
			cur[k] = next
			cur = next
		default:
			return nil, fmt.Errorf(".%s is a %T, want an object", strings.Join(path[:i+1], "."), v)
		}
	}
	return cur, nil
}

// setAnnotation sets or, for an empty value, removes one annotation.
func setAnnotation(obj map[string]any, key, value string) error {
	if value == "" {
		md, _ := obj["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if _, ok := ann[key]; !ok {
			return nil
		}
		delete(ann, key)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
		return nil
	}
	ann, err := ensureObject(obj, pathAnnotations)
	if err != nil {
		return err
	}
	ann[key] = value
	return nil
}

// listItem returns the object at index i of l when it has the given name.
func listItem(l []any, i int, name string) (map[string]any, bool) {
	if i < 0 || i >= len(l) {
		return nil, false
	}
	item, ok := l[i].(map[string]any)
	if !ok || item["name"] != name {
		return nil, false
	}
	return item, true
}

// getMap returns the object at path, or nil.
func getMap(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// unstructuredRemove deletes the field at path when it is there.
func unstructuredRemove(obj map[string]any, path []string) {
	parent, ok := getMap(obj, path[:len(path)-1])
	if ok {
		delete(parent, path[len(path)-1])
	}
}
