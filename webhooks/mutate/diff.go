package mutate

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Which fields the steps changed, told by walking the Go types of the VM
// as decoded and as mutated side by side: structs field by field (as
// encoding/json encodes them), lists item by item while their items keep
// their places, and anything else as one value, encoded as JSON only when
// it changed.

func annotationsJSON(vm *kubevirtv1.VirtualMachine) any {
	if len(vm.Annotations) == 0 {
		return nil
	}
	out := make(map[string]any, len(vm.Annotations))
	for k, v := range vm.Annotations {
		out[k] = v
	}
	return out
}

// changedFields appends the fields of struct values b and a (of one type,
// at path) that differ, descending into structs encoded field by field.
func changedFields(out []fieldChange, path []string, b, a reflect.Value) ([]fieldChange, error) {
	for _, f := range fieldsOf(b.Type()) {
		bv, av := b.Field(f.index), a.Field(f.index)
		var err error
		switch {
		case f.inline:
			out, err = changedFields(out, path, bv, av)
		case f.inlinePtr && bv.IsNil() && av.IsNil():
		case f.inlinePtr && !bv.IsNil() && !av.IsNil():
			out, err = changedFields(out, path, bv.Elem(), av.Elem())
		case f.inlinePtr:
			// Promoted fields come or go: the parent changes whole.
			err = errWhole
		case f.byField:
			out, err = changedStruct(out, appendPath(path, f.name), bv, av)
		case f.ptrByField && !bv.IsNil() && !av.IsNil():
			out, err = changedStruct(out, appendPath(path, f.name), bv.Elem(), av.Elem())
		case reflect.DeepEqual(bv.Addr().Interface(), av.Addr().Interface()):
		case itemByItem(bv, av):
			out, err = changedItems(out, appendPath(path, f.name), bv, av)
		default:
			out, err = changedValue(out, appendPath(path, f.name), bv, av, f.omitempty)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errWhole: a struct's changes cannot be told field by field.
var errWhole = errors.New("the struct changes whole")

// changedStruct is changedFields, or the struct as one changed value when
// its changes cannot be told field by field.
func changedStruct(out []fieldChange, path []string, b, a reflect.Value) ([]fieldChange, error) {
	n := len(out)
	res, err := changedFields(out, path, b, a)
	if errors.Is(err, errWhole) {
		return changedValue(out[:n], path, b, a, false)
	}
	return res, err
}

// changedValue appends the change of one value, encoded whole.
func changedValue(out []fieldChange, path []string, b, a reflect.Value, omitempty bool) ([]fieldChange, error) {
	c := fieldChange{path: path}
	var err error
	if c.before, err = fieldJSON(b, omitempty); err == nil {
		c.after, err = fieldJSON(a, omitempty)
	}
	return append(out, c), err
}

// encodedField is a struct field as encoding/json encodes it.
type encodedField struct {
	index     int
	name      string
	omitempty bool
	// inline: an embedded struct whose fields are promoted (inlinePtr:
	// through a pointer); byField: a struct encoded field by field;
	// ptrByField: a pointer to one.
	inline, inlinePtr, byField, ptrByField bool
}

var fieldCache sync.Map // reflect.Type → []encodedField

// fieldsOf is the fields of struct type t that encoding/json encodes.
func fieldsOf(t reflect.Type) []encodedField {
	if f, ok := fieldCache.Load(t); ok {
		if fields, ok := f.([]encodedField); ok {
			return fields
		}
	}
	var fields []encodedField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" {
			name = f.Name
		}
		promoted := f.Anonymous && strings.HasPrefix(tag, ",") || f.Anonymous && tag == ""
		ptrStruct := f.Type.Kind() == reflect.Pointer && fieldByField(f.Type.Elem())
		fields = append(fields, encodedField{
			index: i, name: name, omitempty: strings.Contains(opts, "omitempty"),
			inline:     promoted && fieldByField(f.Type),
			inlinePtr:  promoted && ptrStruct,
			byField:    !promoted && fieldByField(f.Type),
			ptrByField: !promoted && ptrStruct,
		})
	}
	fieldCache.Store(t, fields)
	return fields
}

// itemByItem reports whether two lists of structs (both there) can be
// diffed item by item: the items they share keep their places (the same
// name, or no name and equal), so only items at the end come or go.
func itemByItem(b, a reflect.Value) bool {
	if b.Kind() != reflect.Slice || !fieldByField(b.Type().Elem()) || b.Len() == 0 || a.Len() == 0 {
		return false
	}
	name, named := b.Type().Elem().FieldByName("Name")
	named = named && name.Type.Kind() == reflect.String && name.Tag.Get("json") == "name"
	for i := range min(b.Len(), a.Len()) {
		bi, ai := b.Index(i), a.Index(i)
		if named && bi.FieldByIndex(name.Index).String() != ai.FieldByIndex(name.Index).String() ||
			!named && !reflect.DeepEqual(bi.Addr().Interface(), ai.Addr().Interface()) {
			return false
		}
	}
	return true
}

// changedItems appends the changes of two lists itemByItem accepts: the
// fields of the items both have, the items after has beyond them, and the
// items it lost, the last first.
func changedItems(out []fieldChange, path []string, b, a reflect.Value) ([]fieldChange, error) {
	var err error
	for i := range min(b.Len(), a.Len()) {
		if out, err = changedStruct(out, appendPath(path, strconv.Itoa(i)), b.Index(i), a.Index(i)); err != nil {
			return nil, err
		}
	}
	for i := b.Len(); i < a.Len(); i++ {
		// A new item: the patch adds it whole, and the response encodes it.
		out = append(out, fieldChange{path: appendPath(path, strconv.Itoa(i)), after: a.Index(i).Addr().Interface()})
	}
	for i := b.Len() - 1; i >= a.Len(); i-- {
		out = append(out, fieldChange{path: appendPath(path, strconv.Itoa(i)), before: true})
	}
	return out, nil
}

func appendPath(path []string, k string) []string {
	return append(path[:len(path):len(path)], k)
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// fieldByField reports whether t is a struct encoding/json encodes field
// by field (no MarshalJSON of its own).
func fieldByField(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !t.Implements(jsonMarshaler) && !reflect.PointerTo(t).Implements(jsonMarshaler)
}

// fieldJSON is v as the patch compares it, or nil when omitempty leaves
// it out: a string, number or bool as it is; anything else encoded and
// decoded as JSON, so that lists and objects compare, and are carried,
// item by item and key by key.
func fieldJSON(v reflect.Value, omitempty bool) (any, error) {
	if omitempty && isEmptyValue(v) {
		return nil, nil
	}
	if scalar(v.Type()) {
		return v.Interface(), nil
	}
	b, err := json.Marshal(v.Addr().Interface())
	if err != nil {
		return nil, fmt.Errorf("encode VirtualMachine: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	return out, nil
}

// scalar reports whether encoding/json writes t as a plain string, number
// or bool.
func scalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return !t.Implements(jsonMarshaler) && !reflect.PointerTo(t).Implements(jsonMarshaler) && !t.Implements(textMarshaler) && !reflect.PointerTo(t).Implements(textMarshaler)
	}
	return false
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Struct:
		return false
	}
	return v.IsZero()
}
