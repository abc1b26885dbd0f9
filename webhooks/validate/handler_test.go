package validate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/policy"
)

func handlerScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func labelledPVC(name string, ann map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, Annotations: ann,
		Labels: map[string]string{api.LabelDataDisk: api.LabelTrue},
	}}
}

func vmRequest(t *testing.T, name string, annotations map[string]string, dryRun bool, pvcs ...string) admission.Request {
	t.Helper()
	volumes := []any{}
	for _, p := range pvcs {
		volumes = append(volumes, map[string]any{"name": "v-" + p, "persistentVolumeClaim": map[string]any{"claimName": p}})
	}
	vm := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "uid-" + name, "annotations": annotations,
			"labels": map[string]any{api.LabelManaged: api.LabelTrue}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"devices": map[string]any{}}, "volumes": volumes}}},
	}
	raw, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req", Operation: admissionv1.Create, Namespace: "ns", Name: name,
		Object: runtime.RawExtension{Raw: raw}, DryRun: &dryRun,
	}}
}

// TestVMHandler drives the validating webhook for VMs: policy verdicts per
// enforcement mode, and claims written only on real admissions.
func TestVMHandler(t *testing.T) {
	ctx := context.Background()
	engine := NewEngine(time.Second)
	if _, err := engine.Load(ctx, ShippedModules()); err != nil {
		t.Fatal(err)
	}
	holder := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes: []kubevirtv1.Volume{{Name: "v", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "taken"}}}}},
		}}}}
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	cases := map[string]struct {
		req         admission.Request
		modes       policy.Modes
		notReady    bool
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantWarning string
		wantDryRun  string
		// wantClaim and wantStale are the claimed-by the disks "free" and
		// "stale" end with.
		wantClaim, wantStale string
	}{
		"mount under /etc is denied": {
			req: vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "free:/etc/x"}, false), wantCode: http.StatusForbidden,
			wantMessage: "metadata.annotations[virtstation.io/data-disks][0].mountPath",
		},
		"shared memory in warn mode is admitted with a warning": {
			req:   vmRequest(t, "vm", map[string]string{api.AnnotationSharedMemory: "1Gi"}, false),
			modes: policy.Modes{"shared-memory": policy.ModeWarn}, wantAllowed: true, wantWarning: "shared-memory",
		},
		"shared memory in dryrun mode is admitted and observed": {
			req:   vmRequest(t, "vm", map[string]string{api.AnnotationSharedMemory: "1Gi"}, false),
			modes: policy.Modes{"shared-memory": policy.ModeDryRun}, wantAllowed: true, wantDryRun: "shared-memory",
		},
		"a disk another VM holds is denied, naming it": {
			req: vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "taken:/data"}, false), wantCode: http.StatusForbidden,
			wantMessage: "ns/holder",
		},
		"a disk another VM holds, named directly in a volume, is denied naming the volume": {
			req: vmRequest(t, "vm", nil, false, "root", "taken"), wantCode: http.StatusForbidden,
			wantMessage: `spec.template.spec.volumes[1].persistentVolumeClaim.claimName: Forbidden: data disk "taken" is attached writable to VM ns/holder (rule: disk-claim; fix: remove volume "v-taken" from this VM`,
		},
		"a free data disk named directly in a volume is claimed; an unlabelled PVC is left alone": {
			req: vmRequest(t, "vm", nil, false, "root", "free"), wantAllowed: true, wantClaim: "ns/vm",
		},
		"a stale claim on a disk named directly is replaced": {
			req: vmRequest(t, "vm", nil, false, "stale"), wantAllowed: true, wantStale: "ns/vm",
		},
		"a free disk is admitted and claimed": {
			req: vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "free:/data"}, false), wantAllowed: true, wantClaim: "ns/vm",
		},
		"a stale claim by a VM that is gone is replaced": {
			req: vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "stale:/data"}, false), wantAllowed: true, wantStale: "ns/vm",
		},
		"a dry run claims nothing": {
			req: vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "free:/data"}, true), wantAllowed: true,
		},
		"policies not loaded yet": {
			req: vmRequest(t, "vm", nil, false), notReady: true, wantCode: http.StatusServiceUnavailable,
		},
		"malformed object": {
			req:      admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte("{")}}},
			wantCode: http.StatusBadRequest,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(handlerScheme(t)).WithObjects(
				holder,
				labelledPVC("free", nil),
				labelledPVC("taken", map[string]string{api.AnnotationClaimedBy: "ns/holder", api.AnnotationClaimedAt: old}),
				labelledPVC("stale", map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}),
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"}},
			).Build()
			modes := &atomic.Pointer[policy.Modes]{}
			modes.Store(&tc.modes)
			var observed []string
			h := &VMHandler{
				Engine: engine, Modes: modes, Client: c,
				Snapshots: Snapshotter{Cache: c, API: c, NoDataVolumes: true, Grace: time.Minute},
				DryRun:    func(v policy.Violation) { observed = append(observed, v.ID) },
			}
			if tc.notReady {
				h.Engine = NewEngine(time.Second)
			}
			resp := h.Handle(ctx, tc.req)
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantCode != 0 && (resp.Result == nil || resp.Result.Code != tc.wantCode) {
				t.Fatalf("result = %+v, want code %d", resp.Result, tc.wantCode)
			}
			if tc.wantMessage != "" && !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Errorf("message %q lacks %q", resp.Result.Message, tc.wantMessage)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.wantWarning) {
				t.Errorf("warnings %q lack %q", resp.Warnings, tc.wantWarning)
			}
			if tc.wantWarning == "" && len(resp.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", resp.Warnings)
			}
			if got := strings.Join(observed, ","); got != tc.wantDryRun {
				t.Errorf("dryrun observations = %q, want %q", got, tc.wantDryRun)
			}
			var free corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "free"}, &free); err != nil {
				t.Fatal(err)
			}
			if got := claims.Read(&free).ClaimedBy; got != tc.wantClaim {
				t.Errorf("free disk claimed by %q, want %q", got, tc.wantClaim)
			}
			wantStale := tc.wantStale
			if wantStale == "" {
				wantStale = "ns/gone"
			}
			var root corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "root"}, &root); err != nil {
				t.Fatal(err)
			}
			if s := claims.Read(&root); !s.Empty() {
				t.Errorf("unlabelled PVC root got claims %+v, want none", s)
			}
			var stale corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "stale"}, &stale); err != nil {
				t.Fatal(err)
			}
			if got := claims.Read(&stale).ClaimedBy; got != wantStale {
				t.Errorf("stale disk claimed by %q, want %q", got, wantStale)
			}
		})
	}
}

// TestVMHandlerAdmitsDeletingVM: a VM being deleted must be able to drop
// its finalizers even when it breaks a policy that changed since.
func TestVMHandlerAdmitsDeletingVM(t *testing.T) {
	engine := NewEngine(time.Second)
	if _, err := engine.Load(context.Background(), ShippedModules()); err != nil {
		t.Fatal(err)
	}
	req := vmRequest(t, "vm", map[string]string{api.AnnotationSharedMemory: "1Gi"}, false)
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req.Object.Raw = raw
	req.Operation = admissionv1.Update
	h := &VMHandler{Engine: engine, Modes: &atomic.Pointer[policy.Modes]{}}
	if resp := h.Handle(context.Background(), req); !resp.Allowed {
		t.Fatalf("update of a VM being deleted was denied: %+v", resp.Result)
	}
}
