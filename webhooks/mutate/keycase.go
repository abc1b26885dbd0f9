package mutate

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

var vmType = reflect.TypeFor[kubevirtv1.VirtualMachine]()

// keyCaseClean reports whether checkKeyCase certainly passes on raw against
// the encoding of the Go type t (what DecodeVM decoded raw into), without
// encoding the typed view: no object of raw has two keys that differ only
// in case, and every key is exactly the JSON name of a field of its struct
// type, a key of a Go map, or no field's name in any case. When it returns
// false, DecodeVM runs checkKeyCase itself, so a false answer costs time,
// never correctness. t nil means raw is below a field the types do not
// know.
func keyCaseClean(raw any, t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch r := raw.(type) {
	case map[string]any:
		if foldedDuplicate(r) {
			return false
		}
		if t != nil && encodesItself(t) {
			// Its encoding could be an object with keys of its choosing.
			return false
		}
		var fields *jsonFields
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				if fields = fieldsOf(t); fields.ambiguous {
					return false
				}
			case reflect.Map:
				elem = t.Elem()
			}
		}
		for k, v := range r {
			vt := elem
			if fields != nil {
				ft, ok := fields.byName[k]
				if !ok && fields.folded[strings.ToLower(k)] {
					return false // a field's name in another case
				}
				vt = ft
			}
			if !keyCaseClean(v, vt) {
				return false
			}
		}
	case []any:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !encodesItself(t) {
			elem = t.Elem()
		}
		for _, v := range r {
			if !keyCaseClean(v, elem) {
				return false
			}
		}
	}
	return true
}

// foldedDuplicate reports whether two keys of m differ only in case.
func foldedDuplicate(m map[string]any) bool {
	if len(m) < 2 {
		return false
	}
	if len(m) <= 8 {
		keys := make([]string, 0, 8)
		for k := range m {
			for _, o := range keys {
				if strings.EqualFold(k, o) {
					return true
				}
			}
			keys = append(keys, k)
		}
		return false
	}
	seen := make(map[string]struct{}, len(m))
	for k := range m {
		lk := strings.ToLower(k)
		if _, dup := seen[lk]; dup {
			return true
		}
		seen[lk] = struct{}{}
	}
	return false
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodesItself reports whether t (or *t) has its own JSON or text encoding.
func encodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || p.Implements(jsonMarshaler) || t.Implements(textMarshaler) || p.Implements(textMarshaler)
}

// jsonFields are the JSON names of a struct type's fields, as
// encoding/json names them (embedded structs without a name promote
// theirs).
type jsonFields struct {
	byName map[string]reflect.Type
	// folded holds every name in lower case.
	folded map[string]bool
	// ambiguous: two names differ only in case or repeat, where
	// encoding/json's precedence rules would decide; never the fast path.
	ambiguous bool
}

var fieldCache sync.Map // reflect.Type -> *jsonFields

func fieldsOf(t reflect.Type) *jsonFields {
	if f, ok := fieldCache.Load(t); ok {
		// The cache holds only *jsonFields; anything else is computed afresh.
		if jf, ok := f.(*jsonFields); ok {
			return jf
		}
	}
	f := &jsonFields{byName: map[string]reflect.Type{}, folded: map[string]bool{}}
	addFields(f, t, 0)
	fieldCache.Store(t, f)
	return f
}

// addFields adds t's fields to f; depth bounds embedding cycles.
func addFields(f *jsonFields, t reflect.Type, depth int) {
	if depth > 8 {
		f.ambiguous = true
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(f, et, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		lower := strings.ToLower(name)
		if _, dup := f.byName[name]; dup || f.folded[lower] {
			f.ambiguous = true
		}
		f.byName[name] = ft
		f.folded[lower] = true
	}
}
