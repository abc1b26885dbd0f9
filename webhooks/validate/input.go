package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/open-policy-agent/opa/v1/ast"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

// DiskState is what the webhook knows about one data disk named in the VM's
// virtstation.io/data-disks annotation, read from informer caches: input.disks
// in the policies.
type DiskState struct {
	// Exists: a DataVolume or PVC of that name exists in the VM's namespace.
	Exists bool `json:"exists"`
	// Labelled: it carries virtstation.io/data-disk=true.
	Labelled bool `json:"labelled"`
	// Kind is DataVolume or PersistentVolumeClaim; empty when it does not exist.
	Kind string `json:"kind"`
	// ClaimedBy is the VM ("ns/name") holding the writable claim, if any.
	ClaimedBy string `json:"claimedBy"`
	// ClaimLive: that claim still holds (its VM exists, a VMI uses the disk,
	// or it is younger than the grace period).
	ClaimLive bool `json:"claimLive"`
	// SharedBy are the live read-only claims ("ns/name"), other than this VM.
	SharedBy []string `json:"sharedBy"`
	// UsedBy are the VMIs ("ns/name"), other than this VM's, whose volumes
	// use the disk.
	UsedBy []string `json:"usedBy"`
}

// value is the state as a policy input value.
func (s DiskState) value() map[string]any {
	return map[string]any{
		"exists":    s.Exists,
		"labelled":  s.Labelled,
		"kind":      s.Kind,
		"claimedBy": s.ClaimedBy,
		"claimLive": s.ClaimLive,
		"sharedBy":  nonNil(s.SharedBy),
		"usedBy":    nonNil(s.UsedBy),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// dataDisksPath is the annotation's field path, as the policies write it.
var dataDisksPath = field.NewPath("metadata", "annotations").Key(api.AnnotationDataDisks)

// BuildInput builds the policy input document for one admission:
//
//	{operation, namespace, name, object, oldObject, userInfo,
//	 dataDisks: [{index, name, mountPath, type, bus, readOnly}],
//	 disks: {<name>: DiskState}}
//
// object and oldObject are the raw JSON of the request (oldObject may be
// empty). namespace and name default to the object's own. dataDisks is the
// parsed virtstation.io/data-disks annotation, with defaults filled in; it
// is empty when the annotation is absent or does not parse (the mutating
// webhook denies those). userInfo is the admission request's user (any
// JSON-encodable value, or nil). The result holds only JSON-like values, so
// it converts to a Rego value quickly; BuildInput never panics.
func BuildInput(op, namespace, name string, object, oldObject []byte, userInfo any, disks map[string]DiskState) (map[string]any, error) {
	obj, err := decodeJSON(object)
	if err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	objMap, ok := obj.(map[string]any)
	if !ok {
		return nil, errors.New("decode object: not a JSON object")
	}
	var old any
	if len(bytes.TrimSpace(oldObject)) > 0 {
		if old, err = decodeJSON(oldObject); err != nil {
			return nil, fmt.Errorf("decode oldObject: %w", err)
		}
	}
	user, err := jsonValue(userInfo)
	if err != nil {
		return nil, fmt.Errorf("encode userInfo: %w", err)
	}
	meta, _ := objMap["metadata"].(map[string]any)
	if namespace == "" {
		namespace, _ = meta["namespace"].(string)
	}
	if name == "" {
		name, _ = meta["name"].(string)
	}
	annotations, _ := meta["annotations"].(map[string]any)
	spec, _ := annotations[api.AnnotationDataDisks].(string)

	diskValues := make(map[string]any, len(disks))
	for n, s := range disks {
		diskValues[n] = s.value()
	}
	return map[string]any{
		"operation": op,
		"namespace": namespace,
		"name":      name,
		"object":    obj,
		"oldObject": old,
		"userInfo":  user,
		"dataDisks": dataDisksValue(spec),
		"disks":     diskValues,
	}, nil
}

// dataDisksValue parses the annotation into the input's dataDisks list.
func dataDisksValue(spec string) []any {
	parsed, errs := api.ParseDataDisks(spec, dataDisksPath)
	if len(errs) > 0 {
		return []any{}
	}
	out := make([]any, len(parsed))
	for i, d := range parsed {
		out[i] = map[string]any{
			"index":     i,
			"name":      d.Name,
			"mountPath": d.MountPath,
			"type":      string(d.Type),
			"bus":       d.Bus,
			"readOnly":  d.ReadOnly,
		}
	}
	return out
}

// decodeJSON decodes exactly one JSON value, keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// jsonValue converts v to maps, slices and scalars through JSON.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any, string, bool:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

// inputShape is the part of the input document a policy set reads: the
// whole of it (all), or only some keys, each with its own shape. Evaluate
// converts only that part to a Rego value, which saves most of the
// conversion of object and oldObject (the shipped policies read only the
// object's annotations).
type inputShape struct {
	all  bool
	keys map[string]*inputShape
}

// readInput returns what the compiled modules read of input. Every
// reference to input counts, down to its first non-constant key; a bare
// input (passed to a function, compared, walked) reads all of it. The
// targets of `with input... as` replace input rather than read it.
func readInput(c *ast.Compiler) *inputShape {
	root := &inputShape{keys: map[string]*inputShape{}}
	var visit func(x any) bool
	visit = func(x any) bool {
		switch x := x.(type) {
		case *ast.With:
			ast.NewGenericVisitor(visit).Walk(x.Value)
			return true
		case ast.Ref:
			if !x.HasPrefix(ast.InputRootRef) {
				return false
			}
			root.add(x[1:])
			for _, t := range x[1:] {
				ast.NewGenericVisitor(visit).Walk(t)
			}
			return true
		case ast.Var:
			if x.Equal(ast.InputRootDocument.Value) {
				root.all = true
			}
		}
		return false
	}
	for _, m := range c.Modules {
		ast.NewGenericVisitor(visit).Walk(m)
	}
	return root
}

// add marks the path (up to its first non-string key) as read.
func (s *inputShape) add(path ast.Ref) {
	for _, t := range path {
		if s.all {
			return
		}
		k, ok := t.Value.(ast.String)
		if !ok {
			break
		}
		next, ok := s.keys[string(k)]
		if !ok {
			next = &inputShape{keys: map[string]*inputShape{}}
			s.keys[string(k)] = next
		}
		s = next
	}
	s.all, s.keys = true, nil
}

// prune returns the part of v the shape covers.
func (s *inputShape) prune(v any) any {
	if s == nil || s.all {
		return v
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(s.keys))
	for k, sub := range s.keys {
		if child, ok := m[k]; ok {
			out[k] = sub.prune(child)
		}
	}
	return out
}
