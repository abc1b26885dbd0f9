package mutate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
)

// Patch returns the JSON patch that turns original, the request's object as
// DecodeVM decoded it, into mutated, what Mutate made of it. Applied to the
// request's raw object it yields mutated; fields the Go types do not know
// survive, since both sides are the generic object.
//
// It is the diff controller-runtime's admission.PatchResponseFromRaw
// computes (gomodules.xyz/jsonpatch: objects key by key, lists index by
// index, a changed type replaced whole), taken on the decoded values
// instead of on re-encoded bytes, so the mutated object is not encoded and
// both documents are not decoded again. Keys are visited in sorted order,
// so equal inputs give equal patches.
func Patch(original, mutated map[string]any) ([]jsonpatch.Operation, error) {
	return diffObject(original, mutated, "", nil)
}

// diffObject appends the operations that turn object a into b at path p.
func diffObject(a, b map[string]any, p string, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	var err error
	for _, k := range sortedKeys(b) {
		kp := p + "/" + escapePointer(k)
		av, ok := a[k]
		if !ok {
			ops = append(ops, jsonpatch.NewOperation("add", kp, b[k]))
			continue
		}
		if ops, err = diffValue(av, b[k], kp, ops); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			ops = append(ops, jsonpatch.NewOperation("remove", p+"/"+escapePointer(k), nil))
		}
	}
	return ops, nil
}

// diffValue appends the operations that turn a into b at path p.
func diffValue(a, b any, p string, ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	if ar, ok := a.(json.RawMessage); ok {
		// A subtree DecodeVM kept raw (rawPaths), which no step touches.
		if br, ok := b.(json.RawMessage); ok && bytes.Equal(ar, br) {
			return ops, nil
		}
	}
	if !isJSON(a) || !isJSON(b) {
		// A step put a Go value that is not decoded JSON into the object:
		// compare it as its JSON encoding, as a diff of the bytes would.
		var err error
		if a, err = asJSON(a); err != nil {
			return nil, err
		}
		if b, err = asJSON(b); err != nil {
			return nil, err
		}
	}
	switch at := a.(type) {
	case nil:
		if b != nil {
			ops = append(ops, jsonpatch.NewOperation("replace", p, b))
		}
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok {
			return append(ops, jsonpatch.NewOperation("replace", p, b)), nil
		}
		return diffObject(at, bt, p, ops)
	case []any:
		bt, ok := b.([]any)
		if !ok {
			return append(ops, jsonpatch.NewOperation("replace", p, b)), nil
		}
		// As jsonpatch: drop surplus items from the end, append new ones,
		// then diff the common prefix item by item.
		n := min(len(at), len(bt))
		for i := len(at) - 1; i >= n; i-- {
			ops = append(ops, jsonpatch.NewOperation("remove", p+"/"+strconv.Itoa(i), nil))
		}
		for i := n; i < len(bt); i++ {
			ops = append(ops, jsonpatch.NewOperation("add", p+"/"+strconv.Itoa(i), bt[i]))
		}
		var err error
		for i := range n {
			if ops, err = diffValue(at[i], bt[i], p+"/"+strconv.Itoa(i), ops); err != nil {
				return nil, err
			}
		}
	default: // string, float64, bool, json.Number
		if a != b {
			ops = append(ops, jsonpatch.NewOperation("replace", p, b))
		}
	}
	return ops, nil
}

// isJSON reports whether v is a value encoding/json decodes into an any.
func isJSON(v any) bool {
	switch v.(type) {
	case nil, bool, string, float64, json.Number, map[string]any, []any:
		return true
	}
	return false
}

// asJSON is v encoded and decoded again.
func asJSON(v any) (any, error) {
	if isJSON(v) {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode %T: %w", v, err)
	}
	return out, nil
}

// pointerEscaper escapes a key for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return pointerEscaper.Replace(k)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
