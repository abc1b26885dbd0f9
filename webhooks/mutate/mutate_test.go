package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/mac"
)

// The VM under test is ns/web.
const (
	testNamespace = "ns"
	testName      = "web"
	// fixedMAC is a valid, assignable MAC a user might write.
	fixedMAC = "02:00:5e:10:00:01"
	// userMAC is a MAC a user set on the interface themselves.
	userMAC = "02:aa:bb:cc:dd:ee"
)

var (
	derivedMAC  = mac.Candidate(testNamespace + "/" + testName).String()
	rehashedMAC = mac.Candidate(testNamespace + "/" + testName + "#1").String()

	pathMACAnnotation = field.NewPath("metadata", "annotations").Key(api.AnnotationMAC)
	pathIfaces        = field.NewPath("spec", "template", "spec", "domain", "devices", "interfaces")
)

// vmJSON is the JSON of the managed VM ns/web with the given annotations
// (none when nil) and spec.template.spec (raw JSON).
func vmJSON(annotations map[string]string, templateSpec string) string {
	var spec any
	if err := json.Unmarshal([]byte(templateSpec), &spec); err != nil {
		panic(fmt.Sprintf("bad template spec in test table: %v: %s", err, templateSpec))
	}
	meta := map[string]any{
		"name":      testName,
		"namespace": testNamespace,
		"labels":    map[string]any{api.LabelManaged: api.LabelTrue},
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   meta,
		"spec": map[string]any{
			"runStrategy": "Always",
			"template":    map[string]any{"spec": spec},
		},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ann builds an annotation map from key, value pairs.
func ann(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// injected is the virtstation.io/injected value recording m.
func injected(m api.InjectedMAC) string {
	b, err := json.Marshal(api.Injected{MAC: &m})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// podSpec is a template spec with the given interfaces on the pod network
// "default".
func podSpec(ifaces ...string) string {
	return `{"domain":{"devices":{"interfaces":[` + strings.Join(ifaces, ",") + `]}},"networks":[{"name":"default","pod":{}}]}`
}

// masquerade is the default pod interface, with mac when not "".
func masquerade(mac string) string {
	if mac == "" {
		return `{"name":"default","masquerade":{}}`
	}
	return `{"name":"default","masquerade":{},"macAddress":"` + mac + `"}`
}

// otherVM is a VM whose pod interface has addr.
func otherVM(namespace, name, addr string) kubevirtv1.VirtualMachine {
	return kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
				Interfaces: []kubevirtv1.Interface{{Name: "default", MacAddress: addr}},
			}}},
		}},
	}
}

type mutateCase struct {
	// op defaults to CREATE.
	op admissionv1.Operation
	vm string
	// oldVM is the stored object on UPDATE.
	oldVM  string
	others []kubevirtv1.VirtualMachine

	// want is the mutated object; unset when the case is denied.
	want         string
	wantInjected *api.InjectedMAC
	// wantWarnings are substrings, one per warning, in order.
	wantWarnings []string
	wantDenied   field.ErrorList
}

func mutateCases() map[string]mutateCase {
	derived := api.InjectedMAC{Interface: "default", Address: derivedMAC, Source: api.MACSourceDerived}
	added := api.InjectedMAC{Interface: "default", Address: derivedMAC, Source: api.MACSourceDerived, AddedInterface: true}
	fromAnnotation := api.InjectedMAC{Interface: "default", Address: fixedMAC, Source: api.MACSourceAnnotation}
	pinnedUserMAC := api.InjectedMAC{Interface: "default", Address: userMAC, Source: api.MACSourceDerived}
	multus := `{"domain":{"devices":{"interfaces":[{"name":"net1","bridge":{}}]}},"networks":[{"name":"net1","multus":{"networkName":"br1"}}]}`
	futureSpec := func(mac string) string {
		iface := `{"name":"default","masquerade":{},"futureIfaceField":["a",{"b":null}]`
		if mac != "" {
			iface += `,"macAddress":"` + mac + `"`
		}
		return `{"futureSpecField":true,"domain":{"futureField":{"x":1},"devices":{"interfaces":[` + iface + `}]}},"networks":[{"name":"default","pod":{}}]}`
	}

	return map[string]mutateCase{
		"derived MAC on existing pod interface": {
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
		},
		"derived MAC on pod interface that is not the first": {
			vm: vmJSON(nil, `{"domain":{"devices":{"interfaces":[{"name":"net1","bridge":{}},{"name":"default","masquerade":{}}]}},
				"networks":[{"name":"net1","multus":{"networkName":"br1"}},{"name":"default","pod":{}}]}`),
			want: vmJSON(ann(api.AnnotationInjected, injected(derived)), `{"domain":{"devices":{"interfaces":[{"name":"net1","bridge":{}},{"name":"default","masquerade":{},"macAddress":"`+derivedMAC+`"}]}},
				"networks":[{"name":"net1","multus":{"networkName":"br1"}},{"name":"default","pod":{}}]}`),
			wantInjected: &derived,
		},
		"no interfaces, auto-attach by default": {
			vm:           vmJSON(nil, `{"domain":{"devices":{}}}`),
			want:         vmJSON(ann(api.AnnotationInjected, injected(added)), `{"domain":{"devices":{"interfaces":[`+masquerade(derivedMAC)+`]}},"networks":[{"name":"default","pod":{}}]}`),
			wantInjected: &added,
		},
		"no interfaces, autoattachPodInterface true": {
			vm:           vmJSON(nil, `{"domain":{"devices":{"autoattachPodInterface":true}}}`),
			want:         vmJSON(ann(api.AnnotationInjected, injected(added)), `{"domain":{"devices":{"autoattachPodInterface":true,"interfaces":[`+masquerade(derivedMAC)+`]}},"networks":[{"name":"default","pod":{}}]}`),
			wantInjected: &added,
		},
		"autoattachPodInterface false": {
			vm:           vmJSON(nil, `{"domain":{"devices":{"autoattachPodInterface":false}}}`),
			want:         vmJSON(nil, `{"domain":{"devices":{"autoattachPodInterface":false}}}`),
			wantWarnings: []string{"MAC not pinned: autoattachPodInterface is false"},
		},
		"multus networks only": {
			vm:           vmJSON(nil, multus),
			want:         vmJSON(nil, multus),
			wantWarnings: []string{"MAC not pinned: the VM has no pod network"},
		},
		"pod network without an interface": {
			vm:           vmJSON(nil, `{"domain":{"devices":{}},"networks":[{"name":"default","pod":{}}]}`),
			want:         vmJSON(nil, `{"domain":{"devices":{}},"networks":[{"name":"default","pod":{}}]}`),
			wantWarnings: []string{`MAC not pinned: pod network "default" has no interface`},
		},
		"annotation off": {
			vm:   vmJSON(ann(api.AnnotationMAC, "off"), podSpec(masquerade(""))),
			want: vmJSON(ann(api.AnnotationMAC, "off"), podSpec(masquerade(""))),
		},
		"annotation off, no interfaces": {
			vm:   vmJSON(ann(api.AnnotationMAC, "OFF"), `{"domain":{"devices":{}}}`),
			want: vmJSON(ann(api.AnnotationMAC, "OFF"), `{"domain":{"devices":{}}}`),
		},
		"annotation auto": {
			vm:           vmJSON(ann(api.AnnotationMAC, "auto"), podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationMAC, "auto", api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
		},
		"annotation fixed MAC": {
			vm:           vmJSON(ann(api.AnnotationMAC, "02:00:5E:10:00:01"), podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationMAC, "02:00:5E:10:00:01", api.AnnotationInjected, injected(fromAnnotation)), podSpec(masquerade(fixedMAC))),
			wantInjected: &fromAnnotation,
		},
		"annotation fixed MAC used by another VM": {
			vm:           vmJSON(ann(api.AnnotationMAC, fixedMAC), podSpec(masquerade(""))),
			others:       []kubevirtv1.VirtualMachine{otherVM("other", "db", "02:00:5E:10:00:01"), otherVM(testNamespace, "cache", fixedMAC)},
			want:         vmJSON(ann(api.AnnotationMAC, fixedMAC, api.AnnotationInjected, injected(fromAnnotation)), podSpec(masquerade(fixedMAC))),
			wantInjected: &fromAnnotation,
			wantWarnings: []string{"MAC " + fixedMAC + " is also used by VirtualMachine cache and 1 VirtualMachine(s) in other namespaces"},
		},
		"annotation fixed MAC already on this VM in the cache": {
			vm:           vmJSON(ann(api.AnnotationMAC, fixedMAC), podSpec(masquerade(""))),
			others:       []kubevirtv1.VirtualMachine{otherVM(testNamespace, testName, fixedMAC)},
			want:         vmJSON(ann(api.AnnotationMAC, fixedMAC, api.AnnotationInjected, injected(fromAnnotation)), podSpec(masquerade(fixedMAC))),
			wantInjected: &fromAnnotation,
		},
		"existing user MAC kept": {
			vm:   vmJSON(nil, podSpec(masquerade(userMAC))),
			want: vmJSON(nil, podSpec(masquerade(userMAC))),
		},
		"existing upper-case user MAC kept as written": {
			vm:   vmJSON(nil, podSpec(masquerade("02:AA:BB:CC:DD:EE"))),
			want: vmJSON(nil, podSpec(masquerade("02:AA:BB:CC:DD:EE"))),
		},
		"existing user MAC wins over the annotation": {
			vm:           vmJSON(ann(api.AnnotationMAC, fixedMAC), podSpec(masquerade(userMAC))),
			want:         vmJSON(ann(api.AnnotationMAC, fixedMAC), podSpec(masquerade(userMAC))),
			wantWarnings: []string{`interface "default" keeps its MAC ` + userMAC + `; the virtstation.io/mac annotation (` + fixedMAC + `) is ignored`},
		},
		"existing user MAC used by another VM": {
			vm:           vmJSON(nil, podSpec(masquerade(userMAC))),
			others:       []kubevirtv1.VirtualMachine{otherVM("other", "db", userMAC)},
			want:         vmJSON(nil, podSpec(masquerade(userMAC))),
			wantWarnings: []string{"MAC " + userMAC + " is also used by 1 VirtualMachine(s) in other namespaces"},
		},
		"MAC pinned earlier keeps its record": {
			vm:           vmJSON(ann(api.AnnotationInjected, injected(pinnedUserMAC)), podSpec(masquerade(userMAC))),
			want:         vmJSON(ann(api.AnnotationInjected, injected(pinnedUserMAC)), podSpec(masquerade(userMAC))),
			wantInjected: &pinnedUserMAC,
		},
		"record of a MAC the interface no longer has is dropped": {
			vm:   vmJSON(ann("team", "a", api.AnnotationInjected, injected(derived)), podSpec(masquerade(userMAC))),
			want: vmJSON(ann("team", "a"), podSpec(masquerade(userMAC))),
		},
		"injected record that is not JSON is rewritten": {
			vm:           vmJSON(ann(api.AnnotationInjected, "{not json"), podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
			wantWarnings: []string{"annotation virtstation.io/injected was not valid JSON and is rewritten"},
		},
		"existing invalid MAC": {
			vm:         vmJSON(nil, podSpec(masquerade("02:aa:bb:cc:dd"))),
			wantDenied: field.ErrorList{field.Invalid(pathIfaces.Index(0).Child("macAddress"), "02:aa:bb:cc:dd", "")},
		},
		"existing multicast MAC on the second interface": {
			vm: vmJSON(nil, `{"domain":{"devices":{"interfaces":[{"name":"net1","bridge":{}},{"name":"default","masquerade":{},"macAddress":"01:00:5e:00:00:01"}]}},
				"networks":[{"name":"net1","multus":{"networkName":"br1"}},{"name":"default","pod":{}}]}`),
			wantDenied: field.ErrorList{field.Invalid(pathIfaces.Index(1).Child("macAddress"), "01:00:5e:00:00:01", "")},
		},
		"existing reserved MAC": {
			vm:         vmJSON(nil, podSpec(masquerade("02:00:00:00:00:00"))),
			wantDenied: field.ErrorList{field.Invalid(pathIfaces.Index(0).Child("macAddress"), "02:00:00:00:00:00", "")},
		},
		// KubeVirt v1.9.0 accepts what net.ParseMAC reads as 6 octets
		// (pkg/network/link/mac.go:35, ValidateMacAddress) and reserves
		// 02:00:00:00:00:00 on masquerade interfaces only
		// (pkg/network/admitter/binding.go:91).
		"existing dotted MAC is kept": {
			vm:   vmJSON(nil, podSpec(masquerade("0200.5e10.0001"))),
			want: vmJSON(nil, podSpec(masquerade("0200.5e10.0001"))),
		},
		"existing reserved MAC on a bridge interface is kept": {
			vm:   vmJSON(nil, podSpec(`{"name":"default","bridge":{},"macAddress":"02:00:00:00:00:00"}`)),
			want: vmJSON(nil, podSpec(`{"name":"default","bridge":{},"macAddress":"02:00:00:00:00:00"}`)),
		},
		"existing reserved MAC in hyphen form on masquerade": {
			vm:         vmJSON(nil, podSpec(masquerade("02-00-00-00-00-00"))),
			wantDenied: field.ErrorList{field.Invalid(pathIfaces.Index(0).Child("macAddress"), "02-00-00-00-00-00", "")},
		},
		"dotted MAC in the annotation is pinned": {
			vm:           vmJSON(ann(api.AnnotationMAC, "0200.5e10.0001"), podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationMAC, "0200.5e10.0001", api.AnnotationInjected, injected(fromAnnotation)), podSpec(masquerade(fixedMAC))),
			wantInjected: &fromAnnotation,
		},
		"reserved MAC in the annotation on a bridge interface is pinned": {
			vm: vmJSON(ann(api.AnnotationMAC, "02:00:00:00:00:00"), podSpec(`{"name":"default","bridge":{}}`)),
			want: vmJSON(ann(api.AnnotationMAC, "02:00:00:00:00:00", api.AnnotationInjected, injected(api.InjectedMAC{Interface: "default", Address: "02:00:00:00:00:00", Source: api.MACSourceAnnotation})),
				podSpec(`{"name":"default","bridge":{},"macAddress":"02:00:00:00:00:00"}`)),
			wantInjected: &api.InjectedMAC{Interface: "default", Address: "02:00:00:00:00:00", Source: api.MACSourceAnnotation},
		},
		"reserved MAC in the annotation on the default interface the webhook adds": {
			vm:         vmJSON(ann(api.AnnotationMAC, "02:00:00:00:00:00"), `{"domain":{"devices":{}}}`),
			wantDenied: field.ErrorList{field.Invalid(pathMACAnnotation, "02:00:00:00:00:00", "")},
		},
		"invalid annotation": {
			vm:         vmJSON(ann(api.AnnotationMAC, "bogus"), podSpec(masquerade(""))),
			wantDenied: field.ErrorList{field.Invalid(pathMACAnnotation, "bogus", "")},
		},
		"reserved MAC in the annotation": {
			vm:         vmJSON(ann(api.AnnotationMAC, "02:00:00:00:00:00"), podSpec(masquerade(userMAC))),
			wantDenied: field.ErrorList{field.Invalid(pathMACAnnotation, "02:00:00:00:00:00", "")},
		},
		"collision with another VM": {
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			others:       []kubevirtv1.VirtualMachine{otherVM("elsewhere", "db", derivedMAC)},
			want:         vmJSON(ann(api.AnnotationInjected, injected(api.InjectedMAC{Interface: "default", Address: rehashedMAC, Source: api.MACSourceDerived})), podSpec(masquerade(rehashedMAC))),
			wantInjected: &api.InjectedMAC{Interface: "default", Address: rehashedMAC, Source: api.MACSourceDerived},
		},
		"collision on the first rehash too": {
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			others:       []kubevirtv1.VirtualMachine{otherVM("elsewhere", "db", derivedMAC), otherVM(testNamespace, "cache", strings.ToUpper(rehashedMAC))},
			want:         vmJSON(ann(api.AnnotationInjected, injected(api.InjectedMAC{Interface: "default", Address: mac.Candidate("ns/web#2").String(), Source: api.MACSourceDerived})), podSpec(masquerade(mac.Candidate("ns/web#2").String()))),
			wantInjected: &api.InjectedMAC{Interface: "default", Address: mac.Candidate("ns/web#2").String(), Source: api.MACSourceDerived},
		},
		"this VM in the cache is no collision": {
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			others:       []kubevirtv1.VirtualMachine{otherVM(testNamespace, testName, derivedMAC)},
			want:         vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
		},
		"update that drops the user's MAC restores it": {
			op:    admissionv1.Update,
			vm:    vmJSON(nil, podSpec(masquerade(""))),
			oldVM: vmJSON(nil, podSpec(masquerade(userMAC))),
			want:  vmJSON(nil, podSpec(masquerade(userMAC))),
		},
		"update that drops a pinned MAC restores it and its record": {
			op:           admissionv1.Update,
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			oldVM:        vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			others:       []kubevirtv1.VirtualMachine{otherVM(testNamespace, testName, derivedMAC)},
			want:         vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
		},
		"update of a VM that never had a MAC derives one": {
			op:           admissionv1.Update,
			vm:           vmJSON(nil, podSpec(masquerade(""))),
			oldVM:        vmJSON(ann(api.AnnotationMAC, "off"), podSpec(masquerade(""))),
			want:         vmJSON(ann(api.AnnotationInjected, injected(derived)), podSpec(masquerade(derivedMAC))),
			wantInjected: &derived,
		},
		"null annotations and devices are treated as absent": {
			vm:           strings.Replace(vmJSON(nil, `{"domain":{"devices":null}}`), `"labels"`, `"annotations":null,"labels"`, 1),
			want:         vmJSON(ann(api.AnnotationInjected, injected(added)), `{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{},"macAddress":"`+derivedMAC+`"}]}},"networks":[{"name":"default","pod":{}}]}`),
			wantInjected: &added,
		},
		"unknown fields survive": {
			vm:           vmJSON(ann("team", "a"), futureSpec("")),
			want:         vmJSON(ann("team", "a", api.AnnotationInjected, injected(derived)), futureSpec(derivedMAC)),
			wantInjected: &derived,
		},
	}
}

// mutateInput decodes a test VM the way the handler does.
func mutateInput(t testing.TB, op admissionv1.Operation, raw, oldRaw string) Input {
	t.Helper()
	if op == "" {
		op = admissionv1.Create
	}
	in := Input{Operation: op, Namespace: testNamespace, Name: testName}
	in.Object = json.RawMessage(raw)
	var err error
	if in.VM, err = DecodeVM([]byte(raw)); err != nil {
		t.Fatalf("decode object: %v", err)
	}
	if oldRaw != "" {
		in.OldVM = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal([]byte(oldRaw), in.OldVM); err != nil {
			t.Fatalf("decode old object: %v", err)
		}
	}
	return in
}

// reinput is in with obj, re-encoded, as the object: what the webhook sees
// when the API server calls it again with its own result.
func reinput(t testing.TB, in Input, obj map[string]any) Input {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode mutated object: %v", err)
	}
	again := mutateInput(t, in.Operation, string(b), "")
	again.Namespace, again.Name, again.OldVM = in.Namespace, in.Name, in.OldVM
	again.Now, again.Requester, again.Controller = in.Now, in.Requester, in.Controller
	return again
}

func toJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func TestMutate(t *testing.T) {
	for name, tc := range mutateCases() {
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, tc.op, tc.vm, tc.oldVM)
			before := toJSON(in.Object)
			res, err := Mutate(context.Background(), in, NewStaticCluster(tc.others))
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if after := toJSON(in.Object); after != before {
				t.Errorf("Mutate changed its input object:\n%s", after)
			}

			if len(tc.wantDenied) > 0 {
				if res.Object != nil {
					t.Errorf("denied mutation returned an object:\n%s", toJSON(res.Object))
				}
				if len(res.Denied) != len(tc.wantDenied) {
					t.Fatalf("Denied = %v, want %v", res.Denied, tc.wantDenied)
				}
				for i, want := range tc.wantDenied {
					got := res.Denied[i]
					if got.Type != want.Type || got.Field != want.Field || !reflect.DeepEqual(got.BadValue, want.BadValue) {
						t.Errorf("Denied[%d] = %s %s %v, want %s %s %v", i, got.Type, got.Field, got.BadValue, want.Type, want.Field, want.BadValue)
					}
					// The message names the rule and the fix.
					if !strings.Contains(got.Detail, "rule: mac") || !strings.Contains(got.Detail, "fix:") {
						t.Errorf("Denied[%d] detail %q: want the rule and the fix", i, got.Detail)
					}
				}
			} else {
				if len(res.Denied) > 0 {
					t.Fatalf("unexpected denial: %v", res.Denied)
				}
				var want map[string]any
				if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
					t.Fatalf("bad want in test table: %v", err)
				}
				if !reflect.DeepEqual(res.Object, want) {
					t.Errorf("object:\n%s\nwant:\n%s", toJSON(res.Object), toJSON(want))
				}
				if !reflect.DeepEqual(res.Injected.MAC, tc.wantInjected) {
					t.Errorf("Injected.MAC = %+v, want %+v", res.Injected.MAC, tc.wantInjected)
				}
			}

			if len(res.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d matching %q", res.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(res.Warnings[i], w) {
					t.Errorf("warning[%d] = %q, want it to contain %q", i, res.Warnings[i], w)
				}
			}
		})
	}
}

// TestMutateIdempotent mutates every admitted case's result again, as the
// API server does with reinvocationPolicy IfNeeded, and as a later UPDATE
// that resubmits the stored object does once the cache holds the VM.
func TestMutateIdempotent(t *testing.T) {
	for name, tc := range mutateCases() {
		if len(tc.wantDenied) > 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, tc.op, tc.vm, tc.oldVM)
			first, err := Mutate(context.Background(), in, NewStaticCluster(tc.others))
			if err != nil || len(first.Denied) > 0 {
				t.Fatalf("first Mutate: %v %v", err, first.Denied)
			}
			again := reinput(t, in, first.Object)
			clusters := map[string]*StaticCluster{
				"reinvoked":          NewStaticCluster(tc.others),
				"stored and updated": NewStaticCluster(append(append([]kubevirtv1.VirtualMachine(nil), tc.others...), *again.VM)),
			}
			for cname, cluster := range clusters {
				second, err := Mutate(context.Background(), again, cluster)
				if err != nil || len(second.Denied) > 0 {
					t.Fatalf("%s: second Mutate: %v %v", cname, err, second.Denied)
				}
				if !reflect.DeepEqual(second.Object, first.Object) {
					t.Errorf("%s: second mutation:\n%s\nfirst:\n%s", cname, toJSON(second.Object), toJSON(first.Object))
				}
				if !reflect.DeepEqual(second.Injected, first.Injected) {
					t.Errorf("%s: second Injected %+v, first %+v", cname, second.Injected, first.Injected)
				}
			}
		})
	}
}

// checkLimitsHeld fails when an admitted mutation read or made more than
// the limits allow.
func checkLimitsHeld(t *testing.T, in Input, out map[string]any) {
	t.Helper()
	for k, v := range in.VM.Annotations {
		limit := api.MaxAnnotationBytes
		if k == api.AnnotationInjected {
			limit = api.MaxInjectedBytes
		}
		if strings.HasPrefix(k, annotationPrefix) && len(v) > limit {
			t.Fatalf("admitted annotation %s of %d bytes, over the limit of %d", k, len(v), limit)
		}
	}
	if added := len(getList(out, pathGPUs)) - len(getList(in.Object, pathGPUs)); added > api.MaxGPUs {
		t.Fatalf("added %d GPUs, over the limit of %d", added, api.MaxGPUs)
	}
	for _, l := range kubevirtListLimits {
		if before, after := len(getList(in.Object, l.path)), len(getList(out, l.path)); after > max(before, l.max) {
			t.Fatalf("%s grew from %d to %d, past KubeVirt's %d", strings.Join(l.path, "."), before, after, l.max)
		}
	}
}

// fuzzCluster holds a VM using the MAC ns/web would derive, and one using
// fixedMAC, so fuzzed inputs reach the collision and duplicate paths.
func fuzzCluster() *StaticCluster {
	c := NewStaticCluster([]kubevirtv1.VirtualMachine{
		otherVM("other", "db", derivedMAC),
		otherVM(testNamespace, "cache", fixedMAC),
	})
	// Data disks the fuzzer may attach, so it reaches the bus choice.
	c.AddDataDisk(api.KindPVC, testNamespace, "iso", stepLabelDataDisk)
	c.AddDataDisk(api.KindDataVolume, testNamespace, "home", stepLabelDataDisk)
	return c
}

func FuzzMutate(f *testing.F) {
	for _, tc := range mutateCases() {
		f.Add([]byte(tc.vm), []byte(tc.oldVM))
	}
	f.Add([]byte(`{"metadata":{"name":"x"},"spec":{"template":{"spec":{}}}}`), []byte(nil))
	f.Add([]byte(`{}`), []byte(nil))
	// The limits (limits_test.go): GPU quantities and entries past them,
	// and an annotation past its size.
	for _, q := range []string{`"8000"`, `"1e9"`, `1e9`, `"-1"`, `"500m"`, `"16"`, `"0"`} {
		f.Add([]byte(vmJSON(stepAnn(), `{"domain":{"resources":{"limits":{"nvidia.com/gpu":`+q+`}},"devices":{}}}`)), []byte(nil))
	}
	f.Add([]byte(vmJSON(stepAnn(api.AnnotationGPUs, h200+"=10"), `{"domain":{"resources":{"requests":{"amd.com/gpu":"7"}},"devices":{}}}`)), []byte(nil))
	f.Add([]byte(vmJSON(stepAnn(api.AnnotationGPUs, gpuAnnotation(api.MaxGPUs+1)), specParts{}.String())), []byte(nil))
	f.Add([]byte(vmJSON(stepAnn(api.AnnotationVideo, strings.Repeat("v", api.MaxAnnotationBytes+1)), specParts{}.String())), []byte(nil))
	// Architectures (arch_test.go): buses and video chosen, or denied, per
	// architecture.
	for _, seed := range archFuzzSeeds() {
		f.Add([]byte(seed), []byte(nil))
	}
	cluster := fuzzCluster()

	f.Fuzz(func(t *testing.T, raw, oldRaw []byte) {
		// Decode as the handler does, for the request the API server
		// would send for ns/web.
		op := admissionv1.Create
		if len(oldRaw) > 0 {
			op = admissionv1.Update
		}
		in, err := decodeInput(vmRequest(op, string(raw), string(oldRaw)))
		if err != nil {
			t.Skip()
		}

		first, err := Mutate(context.Background(), in, cluster)
		if err != nil {
			t.Fatalf("Mutate: %v", err)
		}
		if len(first.Denied) > 0 {
			return
		}
		checkLimitsHeld(t, in, first.Object)
		checkArchHeld(t, first)
		// The handler's patch, applied to the request, is the mutation.
		checkPatch(t, raw, in, first)
		b, err := json.Marshal(first.Object)
		if err != nil {
			t.Fatalf("encode mutated object: %v", err)
		}
		again, err := decodeInput(vmRequest(op, string(b), string(oldRaw)))
		if err != nil {
			t.Fatalf("mutated object does not decode: %v\n%s", err, b)
		}
		second, err := Mutate(context.Background(), again, cluster)
		if err != nil {
			t.Fatalf("second Mutate: %v", err)
		}
		if len(second.Denied) > 0 {
			t.Fatalf("second Mutate denied what the first admitted: %v\n%s", second.Denied, b)
		}
		if !reflect.DeepEqual(second.Object, asObject(again.Object)) {
			t.Fatalf("not idempotent:\nfirst:\n%s\nsecond:\n%s", toJSON(again.Object), toJSON(second.Object))
		}
	})
}
