package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
)

// failingCluster fails every lookup, as a cache that is not synced might.
type failingCluster struct{ *StaticCluster }

func (failingCluster) MACOwners(context.Context, net.HardwareAddr) ([]types.NamespacedName, error) {
	return nil, errors.New("cache not synced: secret detail")
}

// vmRequest is an admission request for ns/web, as the API server sends it.
func vmRequest(op admissionv1.Operation, object, oldObject string) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "req-1",
		Kind:      metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
		Resource:  metav1.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
		Namespace: testNamespace,
		Name:      testName,
		Operation: op,
	}}
	if object != "" {
		req.Object = runtime.RawExtension{Raw: []byte(object)}
	}
	if oldObject != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(oldObject)}
	}
	return req
}

// patchOp is one JSON patch operation the response must contain.
type patchOp struct {
	op, path string
	value    any
}

func TestHandlerHandle(t *testing.T) {
	pinned := vmJSON(ann(api.AnnotationInjected, injected(api.InjectedMAC{Interface: "default", Address: derivedMAC, Source: api.MACSourceDerived})), podSpec(masquerade(derivedMAC)))
	noNamespace := strings.Replace(vmJSON(nil, podSpec(masquerade(""))), `"namespace":"ns",`, "", 1)
	noticed := vmJSON(ann(api.AnnotationInjected, injected(api.InjectedMAC{Interface: "default", Address: derivedMAC, Source: api.MACSourceDerived}),
		api.AnnotationIdleStopAt, "2026-12-06T18:00:00Z"), podSpec(masquerade(derivedMAC)))
	by := func(user string, r admission.Request) admission.Request {
		r.UserInfo.Username = user
		return r
	}

	cases := map[string]struct {
		req     admission.Request
		cluster Cluster
		// controller is the lifecycle controller's user (WithController).
		controller string

		wantAllowed bool
		// wantCode, when set, is Result.Code. A patch response has no
		// Result; the webhook server completes it with 200.
		wantCode int32
		// wantPatch lists operations the patch must contain; wantNoPatch
		// says there must be none.
		wantPatch   []patchOp
		wantNoPatch bool
		// wantMessage is a substring of Result.Message.
		wantMessage string
		// wantCauses are the fields of Result.Details.Causes.
		wantCauses   []string
		wantWarnings []string
	}{
		"a request for another kind is a 400": {
			req: func() admission.Request {
				r := vmRequest(admissionv1.Create, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"ns"}}`, "")
				r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
				return r
			}(),
			wantCode: http.StatusBadRequest, wantMessage: "not /v1, Kind=ConfigMap", wantNoPatch: true,
		},
		"create pins the derived MAC": {
			req:         vmRequest(admissionv1.Create, vmJSON(nil, podSpec(masquerade(""))), ""),
			wantAllowed: true,
			wantPatch: []patchOp{
				{op: "add", path: "/spec/template/spec/domain/devices/interfaces/0/macAddress", value: derivedMAC},
				{op: "add", path: "/metadata/annotations", value: map[string]any{api.AnnotationInjected: injected(api.InjectedMAC{Interface: "default", Address: derivedMAC, Source: api.MACSourceDerived})}},
			},
		},
		"create takes the namespace from the request": {
			req:         vmRequest(admissionv1.Create, noNamespace, ""),
			wantAllowed: true,
			wantPatch: []patchOp{
				{op: "add", path: "/spec/template/spec/domain/devices/interfaces/0/macAddress", value: derivedMAC},
			},
		},
		"create with nothing to pin warns": {
			req:          vmRequest(admissionv1.Create, vmJSON(nil, `{"domain":{"devices":{"autoattachPodInterface":false}}}`), ""),
			wantAllowed:  true,
			wantNoPatch:  true,
			wantWarnings: []string{"MAC not pinned: autoattachPodInterface is false"},
		},
		"update of a mutated VM needs no patch": {
			req:         vmRequest(admissionv1.Update, pinned, pinned),
			wantAllowed: true,
			wantNoPatch: true,
		},
		"update that drops the MAC gets it back": {
			req:         vmRequest(admissionv1.Update, vmJSON(nil, podSpec(masquerade(""))), vmJSON(nil, podSpec(masquerade(userMAC)))),
			wantAllowed: true,
			wantPatch: []patchOp{
				{op: "add", path: "/spec/template/spec/domain/devices/interfaces/0/macAddress", value: userMAC},
			},
		},
		"a tenant's notice is removed with a warning": {
			req:         by("alice", vmRequest(admissionv1.Update, noticed, pinned)),
			controller:  "virtstation-webhook",
			wantAllowed: true,
			wantPatch: []patchOp{
				{op: "remove", path: "/metadata/annotations/virtstation.io~1idle-stop-at"},
			},
			wantWarnings: []string{api.AnnotationIdleStopAt + " is written by the lifecycle controller only"},
		},
		"the lifecycle controller's notice passes": {
			req:         by("virtstation-webhook", vmRequest(admissionv1.Update, noticed, pinned)),
			controller:  "virtstation-webhook",
			wantAllowed: true,
			wantNoPatch: true,
		},
		"malformed JSON": {
			req:         vmRequest(admissionv1.Create, `{"metadata":`, ""),
			wantCode:    http.StatusBadRequest,
			wantNoPatch: true,
		},
		"object that is not a VirtualMachine": {
			req:         vmRequest(admissionv1.Create, `{"spec":{"template":"yes"}}`, ""),
			wantCode:    http.StatusBadRequest,
			wantNoPatch: true,
		},
		"key that differs from a field only in case": {
			req:         vmRequest(admissionv1.Create, `{"metadata":{"name":"web"},"spec":{"template":{"spec":{"domain":{"devices":{"Interfaces":[{"name":"default","masquerade":{}}]}},"networks":[{"name":"default","pod":{}}]}}}}`, ""),
			wantCode:    http.StatusBadRequest,
			wantMessage: `field .spec.template.spec.domain.devices.Interfaces: keys are case-sensitive, want "interfaces"`,
			wantNoPatch: true,
		},
		"malformed old object": {
			req:         vmRequest(admissionv1.Update, vmJSON(nil, podSpec(masquerade(""))), `[]`),
			wantCode:    http.StatusBadRequest,
			wantNoPatch: true,
		},
		"invalid annotation is denied": {
			req:         vmRequest(admissionv1.Create, vmJSON(ann(api.AnnotationMAC, "bogus"), podSpec(masquerade(""))), ""),
			wantCode:    http.StatusForbidden,
			wantNoPatch: true,
			wantMessage: "metadata.annotations[virtstation.io/mac]",
			wantCauses:  []string{"metadata.annotations[virtstation.io/mac]"},
		},
		"invalid MAC on the interface is denied": {
			req:         vmRequest(admissionv1.Create, vmJSON(nil, podSpec(masquerade("01:00:5e:00:00:01"))), ""),
			wantCode:    http.StatusForbidden,
			wantNoPatch: true,
			wantMessage: "spec.template.spec.domain.devices.interfaces[0].macAddress",
			wantCauses:  []string{"spec.template.spec.domain.devices.interfaces[0].macAddress"},
		},
		"cluster lookup failure is an internal error": {
			req:         vmRequest(admissionv1.Create, vmJSON(nil, podSpec(masquerade(""))), ""),
			cluster:     failingCluster{NewStaticCluster(nil)},
			wantCode:    http.StatusInternalServerError,
			wantNoPatch: true,
			wantMessage: "req-1",
		},
		"delete is allowed untouched": {
			req:         vmRequest(admissionv1.Delete, "", vmJSON(nil, podSpec(masquerade("")))),
			wantAllowed: true,
			wantCode:    http.StatusOK,
			wantNoPatch: true,
		},
		"connect is allowed untouched": {
			req:         vmRequest(admissionv1.Connect, "", ""),
			wantAllowed: true,
			wantCode:    http.StatusOK,
			wantNoPatch: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == nil {
				cluster = NewStaticCluster([]kubevirtv1.VirtualMachine{otherVM("other", "db", userMAC)})
			}
			resp := NewHandler(cluster, WithController(tc.controller)).Handle(context.Background(), tc.req)

			if resp.Allowed != tc.wantAllowed {
				t.Errorf("Allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantCode != 0 {
				if resp.Result == nil {
					t.Fatalf("no Result in response, want code %d", tc.wantCode)
				}
				if resp.Result.Code != tc.wantCode {
					t.Errorf("Result.Code = %d, want %d (message %q)", resp.Result.Code, tc.wantCode, resp.Result.Message)
				}
			}
			if tc.wantMessage != "" && !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Errorf("Result.Message = %q, want it to contain %q", resp.Result.Message, tc.wantMessage)
			}
			if tc.wantCode == http.StatusInternalServerError && strings.Contains(resp.Result.Message, "secret detail") {
				t.Errorf("Result.Message %q leaks the internal error", resp.Result.Message)
			}

			if tc.wantCauses != nil {
				if resp.Result.Details == nil {
					t.Fatalf("no Result.Details on a denial")
				}
				var fields []string
				for _, c := range resp.Result.Details.Causes {
					fields = append(fields, c.Field)
					if c.Type != metav1.CauseTypeFieldValueInvalid || c.Message == "" {
						t.Errorf("cause %+v: want type %s and a message", c, metav1.CauseTypeFieldValueInvalid)
					}
				}
				if strings.Join(fields, "|") != strings.Join(tc.wantCauses, "|") {
					t.Errorf("cause fields %q, want %q", fields, tc.wantCauses)
				}
			}

			if tc.wantNoPatch && (len(resp.Patches) > 0 || resp.PatchType != nil) {
				t.Errorf("want no patch, got %v", resp.Patches)
			}
			for _, want := range tc.wantPatch {
				found := false
				for _, p := range resp.Patches {
					if p.Operation == want.op && p.Path == want.path && equalJSON(p.Value, want.value) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("patch %v: want it to contain %s %s %v", resp.Patches, want.op, want.path, want.value)
				}
			}
			if len(tc.wantPatch) > 0 && (resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch) {
				t.Errorf("PatchType = %v, want JSONPatch", resp.PatchType)
			}

			if len(resp.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d matching %q", resp.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning[%d] = %q, want it to contain %q", i, resp.Warnings[i], w)
				}
			}
		})
	}
}

// equalJSON compares a patch value with a Go value by their JSON encoding.
func equalJSON(a, b any) bool {
	return toJSON(a) == toJSON(b)
}

// TestDryRunReinvocation: a dry-run admission writes no Secret, yet its
// object points at <vm>-userdata; when the API server reinvokes the webhook
// for the same request, the user's data must still be found.
func TestDryRunReinvocation(t *testing.T) {
	cluster := NewStaticCluster(nil)
	cluster.AddDataDisk(api.KindPVC, testNamespace, "home", map[string]string{api.LabelDataDisk: api.LabelTrue})
	h := NewHandler(cluster)
	const userData = "#cloud-config\npackages: [git]\n"
	vm := vmJSON(ann(api.AnnotationDataDisks, "home:/home"), `{"domain":{"devices":{"disks":[{"name":"ci","disk":{}}]}},"volumes":[{"name":"ci","cloudInitNoCloud":{"userData":"`+strings.ReplaceAll(userData, "\n", `\n`)+`"}}]}`)
	dry := true
	req := vmRequest(admissionv1.Create, vm, "")
	req.DryRun = &dry
	first := h.Handle(context.Background(), req)
	if !first.Allowed || len(first.Patches) == 0 {
		t.Fatalf("first call: %+v", first.Result)
	}
	ops, err := json.Marshal(first.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	mutated, err := patch.Apply([]byte(vm))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mutated), `"secretRef":{"name":"web-userdata"}`) {
		t.Fatalf("dry-run object does not point at the per-VM Secret: %s", mutated)
	}
	// The reinvocation carries the same UID and the mutated object.
	again := vmRequest(admissionv1.Create, string(mutated), "")
	again.DryRun = &dry
	second := h.Handle(context.Background(), again)
	if !second.Allowed {
		t.Fatalf("reinvocation of the dry run was denied: %s", second.Result.Message)
	}
	if len(second.Patches) != 0 {
		t.Fatalf("reinvocation changed the object again: %+v", second.Patches)
	}
}
