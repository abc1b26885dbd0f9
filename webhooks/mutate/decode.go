package mutate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
)

// DecodeVM decodes a VirtualMachine's JSON as the API server does: keys
// match the Go types' JSON names case-sensitively (sigs.k8s.io/json), and
// a key the types do not know is left out of the typed view and kept in
// the raw object, which the patch is made against. A key that matches a
// known field only when case is ignored, such as "Interfaces", is refused
// with the key that was meant: the API server never sends one (its schema
// prunes it), and render would otherwise drop it without a word. A key
// given twice in one object is refused too.
func DecodeVM(raw []byte) (*kubevirtv1.VirtualMachine, error) {
	var d vmDecoding
	strict, err := sigsjson.UnmarshalStrict(raw, &d, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	for _, e := range strict {
		var fe sigsjson.FieldError
		if !errors.As(e, &fe) {
			continue
		}
		// A key given twice: the typed view would keep one copy and the
		// raw object's reading another. The API server never sends one.
		if strings.HasPrefix(e.Error(), "duplicate field") {
			return nil, fmt.Errorf("decode VirtualMachine: %w", e)
		}
		if want, ok := foldedField(vmType, fe.FieldPath()); ok {
			return nil, fmt.Errorf("decode VirtualMachine: field .%s: keys are case-sensitive, want %q", fe.FieldPath(), want)
		}
	}
	vm := &d.VirtualMachine
	vm.Spec = d.Spec.VirtualMachineSpec
	if t := d.Spec.Template; t != nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{ObjectMeta: t.ObjectMeta, Spec: kubevirtv1.VirtualMachineInstanceSpec(t.Spec)}
	}
	return vm, nil
}

// vmDecoding is a VirtualMachine whose template spec decodes field by
// field: kubevirtv1.VirtualMachineInstanceSpec has an UnmarshalJSON of its
// own (it tidies DNS nameservers) that calls encoding/json, which matches
// keys in any case and reports no unknown field. The fields shadow the
// embedded ones of the same JSON name, as encoding/json resolves them.
type vmDecoding struct {
	kubevirtv1.VirtualMachine
	Spec vmSpecDecoding `json:"spec"`
}

type vmSpecDecoding struct {
	kubevirtv1.VirtualMachineSpec
	Template *templateDecoding `json:"template,omitempty"`
}

type templateDecoding struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec has kubevirtv1.VirtualMachineInstanceSpec's fields and none of
	// its methods.
	Spec vmiSpecFields `json:"spec,omitempty"`
}

type vmiSpecFields kubevirtv1.VirtualMachineInstanceSpec

var vmType = reflect.TypeFor[kubevirtv1.VirtualMachine]()

// foldedField reports whether the unknown field at path (as sigs.k8s.io/json
// spells it: keys joined by ".", list items as "[i]") is a field of its
// struct in another case, and that field's JSON name. Below a map it
// answers false: a map's keys are the user's.
func foldedField(t reflect.Type, path string) (string, bool) {
	keys := strings.Split(path, ".")
	for i, seg := range keys {
		key, _, _ := strings.Cut(seg, "[")
		t = deref(t)
		if t.Kind() != reflect.Struct {
			return "", false
		}
		if i == len(keys)-1 {
			_, name, ok := jsonField(t, key, true)
			return name, ok
		}
		f, _, ok := jsonField(t, key, false)
		if !ok {
			return "", false
		}
		t = f
		for range strings.Count(seg, "[") {
			if t = deref(t); t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return "", false
			}
			t = t.Elem()
		}
	}
	return "", false
}

// jsonField finds the field of struct type t that encoding/json names key
// (fold: ignoring case), looking into embedded structs as encoding/json
// does, and returns its type and JSON name.
func jsonField(t reflect.Type, key string, fold bool) (reflect.Type, string, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && f.Tag.Get("json") == "-" {
			continue
		}
		if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
			if ft, n, ok := jsonField(deref(f.Type), key, fold); ok {
				return ft, n, true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key || fold && strings.EqualFold(name, key) {
			return f.Type, name, true
		}
	}
	return nil, "", false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// rawValue is the value at path in the raw JSON object as encoding/json
// decodes it into an any (numbers as float64), or nil: a value as the user
// wrote it, where the typed view keeps only its meaning.
func rawValue(raw json.RawMessage, path ...string) any {
	for _, k := range path {
		obj, ok := rawObject(raw)
		if !ok {
			return nil
		}
		raw = obj[k]
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}
