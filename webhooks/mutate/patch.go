package mutate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The patch is computed once, at the end, from the typed view: the part of
// the VM the steps write (mutableView), encoded as decoded and as mutated,
// is diffed, and each change is carried onto the request's raw object.
// Both sides come from the same Go type, so fields the types do not know
// are in neither and no operation touches them: they survive in the raw
// object. Where the raw object lacks a parent the typed encoding shows
// (an empty struct, a default), the operation adds only what changed.
// Where a list's items change places (an item of ours removed before the
// user's), the list is written whole, each item the user's raw item
// carried forward by name, so unknown fields stay with their item.

// mutableView is what the steps may write: the annotations and the
// template's spec. TestMutateWritesOnlyTheView checks that they write
// nothing else.
type mutableView struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Template *struct {
			Spec *kubevirtv1.VirtualMachineInstanceSpec `json:"spec,omitempty"`
		} `json:"template,omitempty"`
	} `json:"spec"`
}

// viewOf is vm's mutable part, encoded and decoded as JSON (numbers as
// json.Number, so equal values compare equal).
func viewOf(vm *kubevirtv1.VirtualMachine) (map[string]any, error) {
	var v mutableView
	v.Metadata.Annotations = vm.Annotations
	if vm.Spec.Template != nil {
		v.Spec.Template = &struct {
			Spec *kubevirtv1.VirtualMachineInstanceSpec `json:"spec,omitempty"`
		}{Spec: &vm.Spec.Template.Spec}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode VirtualMachine: %w", err)
	}
	var out map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	return out, nil
}

// patchFor is the JSON patch that carries the change from before to after
// (the typed VM as decoded and as mutated) onto raw, the request's object
// as sent.
func patchFor(raw []byte, before, after *kubevirtv1.VirtualMachine) ([]jsonpatch.Operation, error) {
	b, err := viewOf(before)
	if err != nil {
		return nil, err
	}
	a, err := viewOf(after)
	if err != nil {
		return nil, err
	}
	var ops []jsonpatch.Operation
	carry(&ops, "", raw, b, a)
	return ops, nil
}

// carry appends the operations that carry the change from before to after
// onto raw, the request's value at path p (nil when absent).
func carry(ops *[]jsonpatch.Operation, p string, raw json.RawMessage, before, after any) {
	if reflect.DeepEqual(before, after) {
		return
	}
	switch a := after.(type) {
	case map[string]any:
		if r, ok := rawObject(raw); ok {
			b, _ := before.(map[string]any)
			carryObject(ops, p, r, b, a)
			return
		}
		set(ops, p, raw, added(before, a))
	case []any:
		if r, ok := rawList(raw); ok {
			b, _ := before.([]any)
			carryList(ops, p, r, b, a)
			return
		}
		set(ops, p, raw, a)
	default:
		set(ops, p, raw, after)
	}
}

func carryObject(ops *[]jsonpatch.Operation, p string, raw map[string]json.RawMessage, before, after map[string]any) {
	for _, k := range sortedKeys(after) {
		carry(ops, p+"/"+escapePointer(k), raw[k], before[k], after[k])
	}
	for _, k := range sortedKeys(before) {
		if _, kept := after[k]; kept {
			continue
		}
		if _, ok := raw[k]; ok {
			*ops = append(*ops, jsonpatch.NewOperation("remove", p+"/"+escapePointer(k), nil))
		}
	}
}

// carryList edits a list in place when its items keep their places (the
// common case: an item changed, items appended, or the last ones dropped),
// and otherwise writes it whole.
func carryList(ops *[]jsonpatch.Operation, p string, raw []json.RawMessage, before, after []any) {
	if len(raw) != len(before) {
		set(ops, p, []byte("[]"), after)
		return
	}
	n := min(len(before), len(after))
	for i := range n {
		if !sameItem(before[i], after[i]) {
			set(ops, p, []byte("[]"), mergedList(raw, before, after))
			return
		}
	}
	for i := len(before) - 1; i >= n; i-- {
		*ops = append(*ops, jsonpatch.NewOperation("remove", p+"/"+strconv.Itoa(i), nil))
	}
	for i := range n {
		carry(ops, p+"/"+strconv.Itoa(i), raw[i], before[i], after[i])
	}
	for i := n; i < len(after); i++ {
		*ops = append(*ops, jsonpatch.NewOperation("add", p+"/"+strconv.Itoa(i), after[i]))
	}
}

// set writes v at p: replace where raw has a value, add where it has none.
func set(ops *[]jsonpatch.Operation, p string, raw json.RawMessage, v any) {
	op := "add"
	if raw != nil {
		op = "replace"
	}
	*ops = append(*ops, jsonpatch.NewOperation(op, p, v))
}

// added is what to add where the raw object has nothing: after, less what
// before shows as well (a default the typed encoding writes, not the user).
func added(before, after any) any {
	b, ok := before.(map[string]any)
	a, aok := after.(map[string]any)
	if !ok || !aok {
		return after
	}
	out := make(map[string]any, len(a))
	for k, v := range a {
		if !reflect.DeepEqual(b[k], v) {
			out[k] = added(b[k], v)
		}
	}
	return out
}

// merged is raw with the change from before to after made in it: what
// carry's operations make of raw, as a value.
func merged(raw json.RawMessage, before, after any) any {
	if reflect.DeepEqual(before, after) && raw != nil {
		return raw
	}
	switch a := after.(type) {
	case map[string]any:
		r, ok := rawObject(raw)
		if !ok {
			return added(before, a)
		}
		b, _ := before.(map[string]any)
		out := make(map[string]any, len(r)+len(a))
		for k, v := range r {
			out[k] = v
		}
		for k, v := range a {
			if rv, ok := r[k]; !ok || !reflect.DeepEqual(b[k], v) {
				out[k] = merged(rv, b[k], v)
			}
		}
		for k := range b {
			if _, kept := a[k]; !kept {
				delete(out, k)
			}
		}
		return out
	case []any:
		r, ok := rawList(raw)
		b, _ := before.([]any)
		if !ok || len(r) != len(b) {
			return a
		}
		return mergedList(r, b, a)
	}
	return after
}

// mergedList is after, each item that was in before (by name, or equal
// when it has none) carried forward from its raw item.
func mergedList(raw []json.RawMessage, before, after []any) []any {
	used := make([]bool, len(before))
	out := make([]any, len(after))
	for j, a := range after {
		out[j] = a
		for i, b := range before {
			if !used[i] && sameItem(b, a) {
				used[i] = true
				out[j] = merged(raw[i], b, a)
				break
			}
		}
	}
	return out
}

// sameItem reports whether two list items are the same item: the same
// name, or, without one, equal.
func sameItem(a, b any) bool {
	an, aok := itemName(a)
	bn, bok := itemName(b)
	if aok || bok {
		return aok && bok && an == bn
	}
	return reflect.DeepEqual(a, b)
}

func itemName(v any) (string, bool) {
	o, _ := v.(map[string]any)
	n, ok := o["name"].(string)
	return n, ok
}

// rawObject decodes one level of a raw JSON object.
func rawObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var out map[string]json.RawMessage
	return out, json.Unmarshal(raw, &out) == nil
}

// rawList decodes one level of a raw JSON list.
func rawList(raw json.RawMessage) ([]json.RawMessage, bool) {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	return out, json.Unmarshal(raw, &out) == nil
}

// pointerEscaper escapes a key for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapePointer(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return pointerEscaper.Replace(k)
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	return keys
}
