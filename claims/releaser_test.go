package claims

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/virtstation/virtstation/api"
)

func withUID(vm *kubevirtv1.VirtualMachine, uid types.UID) *kubevirtv1.VirtualMachine {
	vm.UID = uid
	return vm
}

func attachingVM(name, disk string) *kubevirtv1.VirtualMachine {
	vm := vmWith("", pvcVolume("d", disk))
	vm.Name = name
	return vm
}

func TestReleaserReconcile(t *testing.T) {
	old, young := claimedAt(t0.Add(-time.Hour)), claimedAt(t0.Add(-5*time.Second))
	tests := map[string]struct {
		disk    client.Object
		cluster []client.Object
		want    map[string]string
		requeue time.Duration
	}{
		"claim of a missing VM, old: released": {
			disk: diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}),
		},
		"claim of a missing VM, young: kept, looked at again": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: young}),
			want:    map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: young},
			requeue: DefaultGrace - 5*time.Second,
		},
		"claim of a VM that attaches the disk: kept": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "disk")},
			want:    map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old},
		},
		"claim of a VM that detached the disk: released": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "other")},
		},
		"claim of a missing VM while a VMI uses the disk: kept": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{vmiUsing("gone", "disk")},
			want:    map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old},
		},
		"one stale reader of two": {
			disk:    diskPVC(map[string]string{api.AnnotationSharedBy: "ns/a,ns/gone", api.AnnotationClaimedAt: old}),
			cluster: []client.Object{attachingVM("a", "disk")},
			want:    map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: old},
		},
		"data volume": {
			disk: &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk",
				Labels: map[string]string{api.LabelDataDisk: api.LabelTrue}, Annotations: map[string]string{api.AnnotationClaimedBy: "ns/gone", api.AnnotationClaimedAt: old}}},
		},
		"no claims": {disk: diskPVC(map[string]string{"other": "x"}), want: map[string]string{"other": "x"}},
		"claim bound to the attaching VM's uid: kept": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old, api.AnnotationClaimUIDs: "ns/a=u-a"}),
			cluster: []client.Object{withUID(attachingVM("a", "disk"), "u-a")},
			want:    map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old, api.AnnotationClaimUIDs: "ns/a=u-a"},
		},
		"claim bound to another uid than the attaching VM's: released": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: old, api.AnnotationClaimUIDs: "ns/a=forged"}),
			cluster: []client.Object{withUID(attachingVM("a", "disk"), "u-a")},
		},
		"claim bound to another uid, young: kept, looked at again": {
			disk:    diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: young, api.AnnotationClaimUIDs: "ns/a=forged"}),
			cluster: []client.Object{withUID(attachingVM("a", "disk"), "u-a")},
			want:    map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: young, api.AnnotationClaimUIDs: "ns/a=forged"},
			requeue: DefaultGrace - 5*time.Second,
		},
		"one reader bound to another uid of two: only its claim and uid go": {
			disk:    diskPVC(map[string]string{api.AnnotationSharedBy: "ns/a,ns/b", api.AnnotationClaimedAt: old, api.AnnotationClaimUIDs: "ns/a=u-a,ns/b=forged"}),
			cluster: []client.Object{withUID(attachingVM("a", "disk"), "u-a"), withUID(attachingVM("b", "disk"), "u-b")},
			want:    map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: old, api.AnnotationClaimUIDs: "ns/a=u-a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, _ := fakeClient(append(tc.cluster, tc.disk)...)
			r := &Releaser{Client: c, APIReader: c, Reader: c, Now: func() time.Time { return t0 }}
			key := types.NamespacedName{Namespace: "ns", Name: "disk"}
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			if err != nil {
				t.Fatal(err)
			}
			if res != (ctrl.Result{RequeueAfter: tc.requeue}) {
				t.Errorf("result = %+v, want RequeueAfter %s", res, tc.requeue)
			}
			got := tc.disk.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
			if len(got.GetAnnotations())+len(tc.want) > 0 && !reflect.DeepEqual(got.GetAnnotations(), tc.want) {
				t.Errorf("annotations = %v, want %v", got.GetAnnotations(), tc.want)
			}
		})
	}
}

func TestReleaserWithoutDataVolumes(t *testing.T) {
	// Without CDI the reconciler must not ask for DataVolumes at all.
	c, _ := fakeClient(diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/gone"}))
	r := &Releaser{Client: c, APIReader: c, Reader: c, NoDataVolumes: true}
	if n := len(r.diskKinds()); n != 1 {
		t.Fatalf("%d disk kinds, want PVCs only", n)
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "disk"}}); err != nil {
		t.Fatal(err)
	}
	var got corev1.PersistentVolumeClaim
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "disk"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Annotations) != 0 {
		t.Errorf("annotations = %v, want the claim released", got.Annotations)
	}
}

func TestWatchMaps(t *testing.T) {
	ctx := context.Background()
	at := claimedAt(t0)
	pvc := func(name string, a map[string]string) *corev1.PersistentVolumeClaim {
		p := diskPVC(a)
		p.Name = name
		return p
	}
	dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dv", Annotations: map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: at}}}
	other := pvc("elsewhere", map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: at})
	other.Namespace = "other"
	c, _ := fakeClient(
		pvc("mine", map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: at}),
		pvc("theirs", map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: at}),
		pvc("free", nil), dv, other,
	)
	r := &Releaser{Reader: c}
	got := r.disksClaimedBy(ctx, existingVM("a"))
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "mine"}}, {NamespacedName: types.NamespacedName{Namespace: "ns", Name: "dv"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("disksClaimedBy = %v, want %v", got, want)
	}

	vmi := vmiUsing("runner", "mine")
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, dvVolume("x", "dv"), kubevirtv1.Volume{Name: "c", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}})
	got = disksUsedBy(ctx, vmi)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("disksUsedBy = %v, want %v", got, want)
	}
}

func TestPredicates(t *testing.T) {
	claimed := diskPVC(map[string]string{api.AnnotationClaimedBy: "ns/a"})
	free := diskPVC(nil)
	vm := existingVM("a")
	vmEdited := vm.DeepCopy()
	vmEdited.Generation = 2
	running := vmiUsing("r", "disk")
	done := finished(running.DeepCopy())
	tests := map[string]struct {
		got, want bool
	}{
		"disk with claims created":      {carriesClaims().Create(event.CreateEvent{Object: claimed}), true},
		"disk without claims created":   {carriesClaims().Create(event.CreateEvent{Object: free}), false},
		"disk claims released":          {carriesClaims().Update(event.UpdateEvent{ObjectOld: claimed, ObjectNew: free}), false},
		"disk claimed":                  {carriesClaims().Update(event.UpdateEvent{ObjectOld: free, ObjectNew: claimed}), true},
		"disk deleted":                  {carriesClaims().Delete(event.DeleteEvent{Object: claimed}), false},
		"vm created":                    {deletedOrChanged().Create(event.CreateEvent{Object: vm}), false},
		"vm spec changed":               {deletedOrChanged().Update(event.UpdateEvent{ObjectOld: vm, ObjectNew: vmEdited}), true},
		"vm status changed":             {deletedOrChanged().Update(event.UpdateEvent{ObjectOld: vm, ObjectNew: vm.DeepCopy()}), false},
		"vm deleted":                    {deletedOrChanged().Delete(event.DeleteEvent{Object: vm}), true},
		"vmi created":                   {deletedOrFinished().Create(event.CreateEvent{Object: running}), false},
		"vmi finished":                  {deletedOrFinished().Update(event.UpdateEvent{ObjectOld: running, ObjectNew: done}), true},
		"vmi updated, still running":    {deletedOrFinished().Update(event.UpdateEvent{ObjectOld: running, ObjectNew: running.DeepCopy()}), false},
		"vmi updated, already finished": {deletedOrFinished().Update(event.UpdateEvent{ObjectOld: done, ObjectNew: done.DeepCopy()}), false},
		"vmi deleted":                   {deletedOrFinished().Delete(event.DeleteEvent{Object: running}), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}
