package claims

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/webhooks/admit"
)

func existingVM(name string) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func vmiUsing(name, disk string) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{pvcVolume("v", disk)}},
	}
}

func deleteRequest(t *testing.T, kind string, obj runtime.Object) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	m := obj.(metav1.Object)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req-1", Operation: admissionv1.Delete, Kind: metav1.GroupVersionKind{Kind: kind},
		Namespace: m.GetNamespace(), Name: m.GetName(), OldObject: runtime.RawExtension{Raw: raw},
	}}
}

func TestDeletionGuard(t *testing.T) {
	old, young := claimedAt(t0.Add(-time.Hour)), claimedAt(t0.Add(-5*time.Second))
	labelled := map[string]string{api.LabelDataDisk: api.LabelTrue}
	pvc := diskPVC
	annotations := field.NewPath("metadata", "annotations")
	const fixVM = "fix: delete VirtualMachine ns/a, or detach the disk by removing it from the VM's virtstation.io/data-disks annotation or spec.template.spec.volumes, then delete the PersistentVolumeClaim"
	tests := map[string]struct {
		disk    client.Object
		cluster []client.Object
		want    field.ErrorList // nil: allowed
	}{
		"free disk": {disk: pvc(nil)},
		"claimed by an existing VM": {
			disk:    pvc(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "disk")},
			want: field.ErrorList{field.Forbidden(annotations.Key(api.AnnotationClaimedBy),
				"PersistentVolumeClaim ns/disk is attached writable to VirtualMachine ns/a (rule: data-disk-delete; "+fixVM+")")},
		},
		"shared by an existing VM": {
			disk:    pvc(map[string]string{api.AnnotationSharedBy: "ns/a,ns/gone", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "disk")},
			want: field.ErrorList{field.Forbidden(annotations.Key(api.AnnotationSharedBy),
				"PersistentVolumeClaim ns/disk is attached read-only to VirtualMachine ns/a (rule: data-disk-delete; "+fixVM+")")},
		},
		"old claim of an existing VM that no longer attaches the disk": {
			disk:    pvc(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "other")},
		},
		"young claim of an existing VM that does not attach the disk yet": {
			disk:    pvc(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: young}),
			cluster: []client.Object{existingVM("a")},
			want: field.ErrorList{field.Forbidden(annotations.Key(api.AnnotationClaimedBy),
				"PersistentVolumeClaim ns/disk is claimed writable by VirtualMachine ns/a, which does not attach it (any more); the claim was written moments ago, so an update of that VM may still be in progress (rule: data-disk-delete; fix: retry in 15s)")},
		},
		"old claim of a VM that is gone, disk used by a VMI: the VMI is named": {
			disk:    pvc(map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{vmiUsing("runner", "disk")},
			want: field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"),
				"PersistentVolumeClaim ns/disk is in use by VirtualMachineInstance ns/runner (rule: data-disk-delete; fix: stop that VM (virtctl stop) and delete it or detach the disk first, then delete the PersistentVolumeClaim)")},
		},
		"old claim of a VM that does not exist": {
			disk: pvc(map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}),
		},
		"claim naming no VM": {
			disk: pvc(map[string]string{api.AnnotationClaimedBy: "garbage", api.AnnotationClaimedAt: old}),
		},
		"young claim of a VM not created yet": {
			disk: pvc(map[string]string{api.AnnotationClaimedBy: "ns/new", api.AnnotationClaimedAt: young}),
			want: field.ErrorList{field.Forbidden(annotations.Key(api.AnnotationClaimedBy),
				"PersistentVolumeClaim ns/disk is claimed writable by VirtualMachine ns/new, which does not exist yet: its create may still be in progress (rule: data-disk-delete; fix: retry in 15s; if the VM was created by then, delete it or detach the disk from it first)")},
		},
		"used by a VMI": {
			disk:    pvc(nil),
			cluster: []client.Object{vmiUsing("other", "else"), vmiUsing("runner", "disk")},
			want: field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"),
				"PersistentVolumeClaim ns/disk is in use by VirtualMachineInstance ns/runner (rule: data-disk-delete; fix: stop that VM (virtctl stop) and delete it or detach the disk first, then delete the PersistentVolumeClaim)")},
		},
		"unlabelled": {
			disk:    &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", Annotations: map[string]string{api.AnnotationClaimedBy: "ns/a"}}},
			cluster: []client.Object{existingVM("a")},
		},
		"data volume claimed by an existing VM": {
			disk: &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home", Labels: labelled,
				Annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}}},
			cluster: []client.Object{attachingVM("a", "home")},
			want: field.ErrorList{field.Forbidden(annotations.Key(api.AnnotationClaimedBy),
				"DataVolume ns/home is attached writable to VirtualMachine ns/a (rule: data-disk-delete; fix: delete VirtualMachine ns/a, or detach the disk by removing it from the VM's virtstation.io/data-disks annotation or spec.template.spec.volumes, then delete the DataVolume)")},
		},
		"pvc of a claimed data volume": {
			disk: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home", Labels: labelled,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: "home", UID: "u", Controller: ptr(true)}}}},
			cluster: []client.Object{attachingVM("a", "home"), &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home", Labels: labelled,
				Annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}}}},
			want: field.ErrorList{field.Forbidden(field.NewPath("metadata", "ownerReferences"),
				"PersistentVolumeClaim ns/home belongs to DataVolume ns/home, which is attached writable to VirtualMachine ns/a (rule: data-disk-delete; fix: delete VirtualMachine ns/a, or detach the disk by removing it from the VM's virtstation.io/data-disks annotation or spec.template.spec.volumes, then delete the PersistentVolumeClaim)")},
		},
		"pvc of a data volume already gone": {
			disk: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home", Labels: labelled,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "cdi.kubevirt.io/v1beta1", Kind: "DataVolume", Name: "home", UID: "u", Controller: ptr(true)}}}},
			cluster: []client.Object{existingVM("a")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(tc.cluster...).Build()
			g := &DeletionGuard{Reader: reader, Now: func() time.Time { return t0 }}
			kind := api.KindPVC
			if _, ok := tc.disk.(*cdiv1beta1.DataVolume); ok {
				kind = api.KindDataVolume
			}
			got := g.Handle(context.Background(), deleteRequest(t, kind, tc.disk))
			want := admission.Allowed("")
			if tc.want != nil {
				want = admit.Deny(tc.want)
			}
			if got.Allowed != want.Allowed || got.Result.Code != want.Result.Code || got.Result.Message != want.Result.Message {
				t.Errorf("Handle = allowed %v, %d %q\nwant allowed %v, %d %q", got.Allowed, got.Result.Code, got.Result.Message, want.Allowed, want.Result.Code, want.Result.Message)
			}
		})
	}
}

func TestDeletionGuardFaults(t *testing.T) {
	disk := diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a"})
	good := deleteRequest(t, api.KindPVC, disk)
	noOld := good
	noOld.OldObject = runtime.RawExtension{}
	garbled := good
	garbled.OldObject = runtime.RawExtension{Raw: []byte(`{"metadata":`)}
	create := good
	create.Operation = admissionv1.Create
	failing := fake.NewClientBuilder().WithScheme(testScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("etcd is on fire")
		},
	}).Build()
	tests := map[string]struct {
		req      admission.Request
		code     int32
		allowed  bool
		contains string
	}{
		"not a delete":   {req: create, allowed: true, code: http.StatusOK},
		"no old object":  {req: noOld, code: http.StatusBadRequest, contains: "carries no oldObject"},
		"garbled object": {req: garbled, code: http.StatusBadRequest, contains: "decode PersistentVolumeClaim"},
		"reader fails": {req: good, code: http.StatusInternalServerError,
			contains: "could not check whether PersistentVolumeClaim ns/disk is in use; see the webhook log for request req-1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := &DeletionGuard{Reader: failing}
			got := g.Handle(context.Background(), tc.req)
			if got.Allowed != tc.allowed || got.Result.Code != tc.code || !strings.Contains(got.Result.Message, tc.contains) {
				t.Errorf("Handle = allowed %v, %d %q; want allowed %v, %d containing %q", got.Allowed, got.Result.Code, got.Result.Message, tc.allowed, tc.code, tc.contains)
			}
			if strings.Contains(got.Result.Message, "etcd") {
				t.Errorf("internal error leaked to the client: %q", got.Result.Message)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
