package mutate

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// applyOps applies ops to raw and returns the decoded result, as the API
// server applies the webhook's patch.
func applyOps(t testing.TB, raw []byte, ops any) any {
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
		t.Fatalf("apply patch %s to %s: %v", b, raw, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("decode patched object: %v", err)
	}
	return v
}

// checkPatch asserts that the mutation's patch applies to the request as
// sent (every path and list index valid there), yields the mutated object,
// and carries exactly the typed view's changes: the mutated object, decoded
// again, has the typed VM the steps made.
func checkPatch(t testing.TB, raw []byte, in Input, res Result) {
	t.Helper()
	if got := applyOps(t, raw, res.Patch); !reflect.DeepEqual(got, any(res.Object)) {
		t.Fatalf("patched request differs from the mutated object:\npatch %s\ngot  %s\nwant %s", toJSON(res.Patch), toJSON(got), toJSON(res.Object))
	}
	vm, err := DecodeVM([]byte(mustJSON(t, res.Object)))
	if err != nil {
		t.Fatalf("mutated object does not decode: %v", err)
	}
	if got, want := mutableJSON(t, vm), mutableJSON(t, res.VM); got != want {
		t.Fatalf("the patched object's typed view differs from the mutated VM:\ngot  %s\nwant %s", toJSON(got), toJSON(want))
	}
	again, err := patchFor(in.Object, in.VM, res.VM)
	if err != nil || toJSON(again) != toJSON(res.Patch) {
		t.Fatalf("the patch is not deterministic: %v\n%s\n%s", err, toJSON(res.Patch), toJSON(again))
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
		checkPatch(t, []byte(vm), in, res)
		checkWritesOnlyTheView(t, in.VM, res.VM)
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

// mutableJSON is the part of vm the steps write, as JSON.
func mutableJSON(t testing.TB, vm *kubevirtv1.VirtualMachine) string {
	t.Helper()
	view := map[string]any{}
	if len(vm.Annotations) > 0 {
		view["annotations"] = vm.Annotations
	}
	if vm.Spec.Template != nil {
		view["spec"] = vm.Spec.Template.Spec
	}
	return mustJSON(t, view)
}

// checkWritesOnlyTheView fails when the steps changed the VM outside
// mutableView, which the patch would not carry.
func checkWritesOnlyTheView(t testing.TB, before, after *kubevirtv1.VirtualMachine) {
	t.Helper()
	strip := func(vm *kubevirtv1.VirtualMachine) string {
		c := vm.DeepCopy()
		c.Annotations = nil
		if c.Spec.Template != nil {
			c.Spec.Template.Spec = kubevirtv1.VirtualMachineInstanceSpec{}
		}
		return mustJSON(t, c)
	}
	if a, b := strip(before), strip(after); a != b {
		t.Fatalf("the steps wrote outside the mutable view:\nbefore %s\nafter  %s", a, b)
	}
}

// TestPatchCarriesChanges covers the patch's shapes on raw objects the
// typed view does not show whole: every case must carry the change from
// before to after onto raw, and leave what the types do not know alone.
func TestPatchCarriesChanges(t *testing.T) {
	const spec = `"spec":{"template":{"spec":`
	cases := map[string]struct {
		raw string
		// edit changes the typed VM as a step would.
		edit func(vm *kubevirtv1.VirtualMachine)
		want string
	}{
		"nothing changes": {
			raw:  `{"metadata":{"name":"a"},` + spec + `{"domain":{"devices":{}},"future":1}}}}`,
			edit: func(*kubevirtv1.VirtualMachine) {},
			want: `{"metadata":{"name":"a"},` + spec + `{"domain":{"devices":{}},"future":1}}}}`,
		},
		"parents the raw object lacks are added with only what changed": {
			raw: `{` + spec + `{}}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Annotations = map[string]string{"a": "b"}
				vm.Spec.Template.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default"}}
			},
			want: `{"metadata":{"annotations":{"a":"b"}},` + spec + `{"domain":{"devices":{"interfaces":[{"name":"default"}]}}}}}}`,
		},
		"unknown fields of an edited item stay": {
			raw: `{` + spec + `{"domain":{"devices":{"interfaces":[{"name":"a","future":[1,{"b":null}]}]}}}}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = "02:00:00:00:00:01"
			},
			want: `{` + spec + `{"domain":{"devices":{"interfaces":[{"name":"a","future":[1,{"b":null}],"macAddress":"02:00:00:00:00:01"}]}}}}}}`,
		},
		"unknown fields move with their item when an item before it goes": {
			raw: `{` + spec + `{"domain":{"devices":{"gpus":[{"name":"gpu0","deviceName":"x"},{"name":"mine","deviceName":"y","future":true}]}}}}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.Devices.GPUs = vm.Spec.Template.Spec.Domain.Devices.GPUs[1:]
			},
			want: `{` + spec + `{"domain":{"devices":{"gpus":[{"name":"mine","deviceName":"y","future":true}]}}}}}}`,
		},
		"unnamed items are carried by equality": {
			raw: `{` + spec + `{"accessCredentials":[{"sshPublicKey":{"source":{"secret":{"secretName":"ours"}},"propagationMethod":{"qemuGuestAgent":{"users":["u"]}}}},{"sshPublicKey":{"source":{"secret":{"secretName":"mine"}},"propagationMethod":{"noCloud":{}}},"future":"x"}]}}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Spec.Template.Spec.AccessCredentials = vm.Spec.Template.Spec.AccessCredentials[1:]
			},
			want: `{` + spec + `{"accessCredentials":[{"sshPublicKey":{"source":{"secret":{"secretName":"mine"}},"propagationMethod":{"noCloud":{}}},"future":"x"}]}}}}`,
		},
		"numbers and quantities keep the user's spelling": {
			raw: `{` + spec + `{"domain":{"resources":{"requests":{"memory":"1024Mi"}}},"future":1.0}}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Annotations = map[string]string{"a": "b"}
			},
			want: `{"metadata":{"annotations":{"a":"b"}},` + spec + `{"domain":{"resources":{"requests":{"memory":"1024Mi"}}},"future":1.0}}}}`,
		},
		"keys to escape": {
			raw: `{"metadata":{"annotations":{"a/b":"1","c~d":"2"}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) {
				vm.Annotations["a/b"] = "3"
				delete(vm.Annotations, "c~d")
			},
			want: `{"metadata":{"annotations":{"a/b":"3"}}}`,
		},
		"the last annotation goes with the map": {
			raw:  `{"metadata":{"annotations":{"a":"1"},"labels":{"x":"y"}}}`,
			edit: func(vm *kubevirtv1.VirtualMachine) { vm.Annotations = nil },
			want: `{"metadata":{"labels":{"x":"y"}}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before, err := DecodeVM([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			after := copyForMutation(before)
			tc.edit(after)
			ops, err := patchFor([]byte(tc.raw), before, after)
			if err != nil {
				t.Fatal(err)
			}
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if got := applyOps(t, []byte(tc.raw), ops); !reflect.DeepEqual(got, want) {
				t.Fatalf("patch %s gives\n%s\nwant\n%s", toJSON(ops), toJSON(got), toJSON(want))
			}
		})
	}
}
