package mutate

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// applyPatch applies ops to raw and returns the decoded result.
func applyPatch(t testing.TB, raw []byte, ops any) any {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatalf("encode patch: %v", err)
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		t.Fatalf("decode patch %s: %v", b, err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch %s: %v", b, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("decode patched object: %v", err)
	}
	return v
}

// asDecoded is v encoded and decoded again, as the API server would store it.
func asDecoded(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out
}

// checkPatch asserts that Patch(original of raw, mutated), applied to raw,
// yields mutated, and yields what the byte diff controller-runtime's
// PatchResponseFromRaw computes yields.
func checkPatch(t testing.TB, raw []byte, original, mutated map[string]any) {
	t.Helper()
	ops, err := Patch(original, mutated)
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	got := applyPatch(t, raw, ops)
	if want := asDecoded(t, mutated); !reflect.DeepEqual(got, want) {
		t.Fatalf("patched request differs from the mutated object:\npatch %s\ngot  %s\nwant %s", toJSON(ops), toJSON(got), toJSON(want))
	}
	out, err := json.Marshal(mutated)
	if err != nil {
		t.Fatal(err)
	}
	byBytes := admission.PatchResponseFromRaw(raw, out)
	if !byBytes.Allowed {
		t.Fatalf("PatchResponseFromRaw: %v", byBytes.Result)
	}
	if old := applyPatch(t, raw, byBytes.Patches); !reflect.DeepEqual(got, old) {
		t.Fatalf("patched request differs from PatchResponseFromRaw's:\ngot  %s\nwant %s", toJSON(got), toJSON(old))
	}
	again, err := Patch(original, mutated)
	if err != nil || !reflect.DeepEqual(again, ops) {
		t.Fatalf("Patch is not deterministic: %v\n%s\n%s", err, toJSON(ops), toJSON(again))
	}
}

// TestPatchReproducesMutation: for every mutation test case that admits,
// the handler's patch applied to the request reproduces the mutated object.
func TestPatchReproducesMutation(t *testing.T) {
	run := func(t *testing.T, op admissionv1.Operation, vm, oldVM string, cluster Cluster) {
		in := mutateInput(t, op, vm, oldVM)
		res, err := Mutate(context.Background(), in, cluster)
		if err != nil {
			t.Fatalf("Mutate: %v", err)
		}
		if len(res.Denied) > 0 {
			t.Skip("denied")
		}
		checkPatch(t, []byte(vm), in.Object, res.Object)
	}
	for name, tc := range mutateCases() {
		t.Run("mutate/"+name, func(t *testing.T) {
			run(t, tc.op, tc.vm, tc.oldVM, NewStaticCluster(tc.others))
		})
	}
	for _, g := range loadStepGoldens(t) {
		t.Run("steps/"+g.name, func(t *testing.T) {
			run(t, g.in.Operation, g.vm, g.oldVM, g.cluster(t))
		})
	}
}

// TestPatch covers the diff's shapes on objects the mutation would not
// produce: every pair must patch the first into the second, as the byte
// diff does.
func TestPatch(t *testing.T) {
	cases := map[string]struct{ from, to string }{
		"equal":                    {`{"a":1,"b":[1,{"c":null}]}`, `{"a":1,"b":[1,{"c":null}]}`},
		"add and remove keys":      {`{"a":1,"b":2}`, `{"b":2,"c":{"d":[]}}`},
		"keys to escape":           {`{"a/b":1,"c~d":{"e/~f":2}}`, `{"a/b":3,"c~d":{"e/~f":4,"~":5}}`},
		"list grows":               {`{"l":[1,2]}`, `{"l":[1,2,{"x":3},4]}`},
		"list shrinks":             {`{"l":[1,2,3,4]}`, `{"l":[1,{"y":2}]}`},
		"type changes":             {`{"a":{"b":1},"c":[1],"d":"s","e":null}`, `{"a":[1],"c":{"b":1},"d":2,"e":{"f":true}}`},
		"value to null":            {`{"a":{"b":1},"c":2}`, `{"a":null,"c":null}`},
		"unknown fields untouched": {`{"spec":{"future":{"x":[1,2]},"known":1}}`, `{"spec":{"future":{"x":[1,2]},"known":2}}`},
		"numbers written long":     {`{"a":1.0,"b":1e2,"c":0.5}`, `{"a":1,"b":100,"c":0.25}`},
		"empty to full":            {`{}`, `{"metadata":{"annotations":{"k":"v"}}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var from, to map[string]any
			if err := json.Unmarshal([]byte(tc.from), &from); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.to), &to); err != nil {
				t.Fatal(err)
			}
			checkPatch(t, []byte(tc.from), from, to)
		})
	}
}

// TestPatchGoValues: a step may put Go values that are not decoded JSON
// (typed maps and slices, integers) into the object; they compare by their
// encoding.
func TestPatchGoValues(t *testing.T) {
	raw := []byte(`{"a":{"x":"1"},"b":[1,2],"c":3,"d":{"keep":true}}`)
	var from map[string]any
	if err := json.Unmarshal(raw, &from); err != nil {
		t.Fatal(err)
	}
	to := map[string]any{"a": map[string]string{"x": "1"}, "b": []int{1, 3}, "c": 3, "d": map[string]bool{"keep": true}}
	checkPatch(t, raw, from, to)
	ops, err := Patch(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Operation != "replace" || ops[0].Path != "/b/1" {
		t.Fatalf("Patch = %s, want only the changed item replaced", toJSON(ops))
	}
}
