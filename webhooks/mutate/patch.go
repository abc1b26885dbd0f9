package mutate

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// The patch is computed once, at the end, from the typed view: the fields
// the steps changed (the annotations and fields of the template's spec,
// found by walking the Go types) are encoded as decoded and as mutated,
// and each change is carried onto the request's raw object. Both sides
// come from the same Go type, so fields the types do not know are in
// neither and no operation touches them: they survive in the raw object.
// Where the raw object lacks a parent the typed encoding shows (an empty
// struct, a default), the operation adds only what changed. Where a
// list's items change places (an item of ours removed before the user's),
// the list is written whole, each item the user's raw item carried forward
// by name, so unknown fields stay with their item.

// fieldChange is one field the steps changed: its JSON path and its
// values as decoded and as mutated (nil: left out of the encoding).
type fieldChange struct {
	path          []string
	before, after any
}

// patchFor is the JSON patch that carries the change from before to after
// (the typed VM as decoded and as mutated) onto raw, the request's object
// as sent. The steps write only the annotations and the template's spec;
// TestPatchReproducesMutation checks that they write nothing else.
func patchFor(raw []byte, before, after *kubevirtv1.VirtualMachine) ([]jsonpatch.Operation, error) {
	var changes []fieldChange
	if !maps.Equal(before.Annotations, after.Annotations) {
		changes = append(changes, fieldChange{path: []string{"metadata", "annotations"}, before: annotationsJSON(before), after: annotationsJSON(after)})
	}
	if bt, at := before.Spec.Template, after.Spec.Template; bt != nil && at != nil {
		var err error
		path := []string{"spec", "template", "spec"}
		if changes, err = changedStruct(changes, path, reflect.ValueOf(&bt.Spec).Elem(), reflect.ValueOf(&at.Spec).Elem()); err != nil {
			return nil, err
		}
	}
	var ops []jsonpatch.Operation
	r := &rawTree{raw: raw}
	for i := 0; i < len(changes); {
		n := r.carryChanges(&ops, changes[i:])
		i += n
	}
	return ops, nil
}

// rawTree is the request's object, read one level at a time as the
// changes need it. The changes come in path order, so it keeps the values
// along the last change's path and starts the next one where the two
// paths part.
type rawTree struct {
	raw json.RawMessage
	// path is the last change's path, at[i] the raw value at path[:i]
	// (at[0] the object).
	path []string
	at   []json.RawMessage
}

// lookup is the raw value at path, or the depth of the first level that
// is no object or list (ok false) and the raw value there.
func (r *rawTree) lookup(path []string) (raw json.RawMessage, depth int, ok bool) {
	if len(r.at) == 0 {
		r.path, r.at = nil, []json.RawMessage{r.raw}
	}
	common := 0
	for common < len(path) && common < len(r.path) && path[common] == r.path[common] {
		common++
	}
	r.path, r.at = append(r.path[:common], path[common:]...), r.at[:common+1]
	for depth = common; depth < len(path); depth++ {
		child, ok := rawChild(r.at[depth], path[depth])
		if !ok {
			r.path = r.path[:depth]
			return r.at[depth], depth, false
		}
		r.at = append(r.at, child)
	}
	return r.at[len(path)], len(path), true
}

// carryChanges carries changes[0], and the changes after it that share
// the first level the raw object lacks, onto the raw object, and says how
// many it carried.
func (r *rawTree) carryChanges(ops *[]jsonpatch.Operation, changes []fieldChange) int {
	c := changes[0]
	raw, depth, ok := r.lookup(c.path)
	if ok {
		carry(ops, pointer(c.path), raw, c.before, c.after)
		return 1
	}
	// The raw object has no object here: add one holding what changed
	// below, for every change below it.
	prefix := c.path[:depth]
	n := 1
	for n < len(changes) && len(changes[n].path) > depth && slices.Equal(changes[n].path[:depth], prefix) {
		n++
	}
	value := map[string]any{}
	for _, ch := range changes[:n] {
		if ch.after != nil {
			setNested(value, ch.path[depth:], added(ch.before, ch.after))
		}
	}
	if len(value) > 0 {
		set(ops, pointer(prefix), raw, value)
	}
	return n
}

// setNested sets v at path in m, making the objects on the way.
func setNested(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// pointer is path as a JSON pointer (RFC 6901).
func pointer(path []string) string {
	var b strings.Builder
	for _, k := range path {
		b.WriteString("/")
		b.WriteString(escapePointer(k))
	}
	return b.String()
}

// carry appends the operations that carry the change from before to after
// onto raw, the request's value at path p (nil when absent).
func carry(ops *[]jsonpatch.Operation, p string, raw json.RawMessage, before, after any) {
	if reflect.DeepEqual(before, after) {
		return
	}
	switch a := after.(type) {
	case nil:
		if raw != nil {
			*ops = append(*ops, jsonpatch.NewOperation("remove", p, nil))
		}
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
// when it has none) carried forward from its raw item. Items are matched
// through an index, so a list of N items costs O(N), not O(N²): a tenant
// sends lists as long as the request allows.
func mergedList(raw []json.RawMessage, before, after []any) []any {
	idx := indexItems(before)
	out := make([]any, len(after))
	for j, a := range after {
		out[j] = a
		if i, ok := idx.take(a); ok {
			out[j] = merged(raw[i], before[i], a)
		}
	}
	return out
}

// itemIndex finds list items by itemKey, each once, in list order.
type itemIndex map[string][]int

func indexItems(items []any) itemIndex {
	idx := make(itemIndex, len(items))
	for i, v := range items {
		if k, ok := itemKey(v); ok {
			idx[k] = append(idx[k], i)
		}
	}
	return idx
}

// take is the first unused item with v's key.
func (idx itemIndex) take(v any) (int, bool) {
	k, ok := itemKey(v)
	if !ok || len(idx[k]) == 0 {
		return 0, false
	}
	i := idx[k][0]
	idx[k] = idx[k][1:]
	return i, true
}

// itemKey is what makes two items the same item (sameItem): the name, or,
// for an item without one, its JSON encoding (canonical: map keys sorted).
func itemKey(v any) (string, bool) {
	if n, ok := itemName(v); ok {
		return "name:" + n, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return "value:" + string(b), true
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
