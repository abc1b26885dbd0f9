package mutate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DecodeVM decodes a VirtualMachine's JSON twice: as a generic object (what
// the mutation edits, so unknown fields survive) and as the typed view (what
// the mutation reads). encoding/json matches keys case-insensitively, so a
// key like "Interfaces" would fill the typed view while the generic object
// has no "interfaces": the two views would disagree. The API server prunes
// such keys before admission; for other callers (render) DecodeVM rejects
// them with the path and the key that was meant. The check is first made
// from the Go types alone (keyCaseClean), which settles the common case;
// only a doubtful object has its typed view encoded and compared.
func DecodeVM(raw []byte) (map[string]any, *kubevirtv1.VirtualMachine, error) {
	obj, err := decodeGeneric(raw, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(raw, vm); err != nil {
		return nil, nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	if keyCaseClean(obj, vmType) {
		// The common case, told from the Go types alone: the check below
		// would pass.
		return obj, vm, nil
	}
	if err := checkKeyCaseEncoded(obj, vm); err != nil {
		return nil, nil, err
	}
	return obj, vm, nil
}

// checkKeyCaseEncoded runs checkKeyCase against the typed view's encoding.
func checkKeyCaseEncoded(obj map[string]any, vm *kubevirtv1.VirtualMachine) error {
	canonical, err := json.Marshal(vm)
	if err != nil {
		return fmt.Errorf("decode VirtualMachine: %w", err)
	}
	var typed map[string]any
	if err := json.Unmarshal(canonical, &typed); err != nil {
		return fmt.Errorf("decode VirtualMachine: %w", err)
	}
	return checkKeyCase(obj, typed, "")
}

// checkKeyCase walks raw beside the typed view's encoding and fails on a key
// that only matches a known field when case is ignored.
func checkKeyCase(raw, typed any, path string) error {
	switch r := raw.(type) {
	case map[string]any:
		folded := make(map[string]string, len(r))
		for k := range r {
			lk := strings.ToLower(k)
			if other, dup := folded[lk]; dup {
				a, b := min(k, other), max(k, other)
				return fmt.Errorf("decode VirtualMachine: fields %s.%s and %s.%s differ only in case", path, a, path, b)
			}
			folded[lk] = k
		}
		t, ok := typed.(map[string]any)
		if !ok {
			return nil
		}
		for k, v := range r {
			if tv, ok := t[k]; ok {
				if err := checkKeyCase(v, tv, path+"."+k); err != nil {
					return err
				}
				continue
			}
			for tk := range t {
				if strings.EqualFold(tk, k) {
					return fmt.Errorf("decode VirtualMachine: field %s%s: keys are case-sensitive, want %q", path, "."+k, tk)
				}
			}
		}
	case []any:
		t, ok := typed.([]any)
		if !ok || len(t) != len(r) {
			return nil
		}
		for i := range r {
			if err := checkKeyCase(r[i], t[i], path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawPaths are the subtrees of a VM that the mutation neither reads nor
// writes, and where a VM's bulk is: DecodeVM keeps them as raw JSON
// (json.RawMessage) instead of decoding them into maps, which cost several
// times their bytes. Patch compares them as bytes.
var rawPaths = [][]string{
	{"status"},
	{"metadata", "managedFields"},
	{"spec", "template", "metadata"},
	{"spec", "dataVolumeTemplates"},
}

// decodeGeneric decodes the JSON object raw at path prefix into a generic
// map, keeping rawPaths below it as raw JSON.
func decodeGeneric(raw []byte, prefix []string) (map[string]any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, nil
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		path := append(prefix[:len(prefix):len(prefix)], k)
		var err error
		switch rawPathKind(path) {
		case rawKeep:
			out[k] = v
		case rawAbove:
			if trimmed := bytes.TrimLeft(v, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
				out[k], err = decodeGeneric(v, path)
				break
			}
			fallthrough
		default:
			var x any
			err = json.Unmarshal(v, &x)
			out[k] = x
		}
		if err != nil {
			return nil, err
		}
		delete(fields, k) // its bytes are garbage once decoded
	}
	return out, nil
}

// Kinds of path for decodeGeneric.
const (
	rawNone  = iota // decode it
	rawKeep         // keep it as raw JSON
	rawAbove        // a raw path lies below it
)

func rawPathKind(path []string) int {
	kind := rawNone
	for _, r := range rawPaths {
		switch {
		case len(r) == len(path) && slices.Equal(r, path):
			return rawKeep
		case len(r) > len(path) && slices.Equal(r[:len(path)], path):
			kind = rawAbove
		}
	}
	return kind
}
