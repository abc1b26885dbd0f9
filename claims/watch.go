package claims

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SetupWithManager registers the Releaser on mgr. It watches
//   - PVCs and DataVolumes (unless NoDataVolumes) that carry claims, through
//     mgr's cache (which may hold only the labelled data disks);
//   - VirtualMachines, on deletion and on changes of their annotations or
//     spec (a disk detached): each enqueues the disks of its namespace it
//     holds a claim on;
//   - VirtualMachineInstances, on deletion and when they finish: each
//     enqueues the disks its volumes used.
//
// A claim too young to judge is looked at again when its grace runs out.
func (r *Releaser) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetCache()
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(carriesClaims())).
		Watches(&kubevirtv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.disksClaimedBy),
			builder.WithPredicates(deletedOrChanged())).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(disksUsedBy),
			builder.WithPredicates(deletedOrFinished()))
	if !r.NoDataVolumes {
		b = b.Watches(&cdiv1beta1.DataVolume{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(carriesClaims()))
	}
	return b.Complete(r)
}

// carriesClaims passes creations and updates of disks with claims. A
// disk's deletion needs no release.
func carriesClaims() predicate.Predicate {
	has := func(o client.Object) bool { return o != nil && !Read(o).Empty() }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return has(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return has(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return has(e.Object) },
	}
}

// deletedOrChanged passes VM deletions, and updates of a VM's spec or
// annotations (KubeVirt's status updates cannot detach a disk).
func deletedOrChanged() predicate.Predicate {
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  changed.Update,
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// deletedOrFinished passes VMI deletions, and the update that moves a VMI
// into a final phase (a finished VMI uses no disk).
func deletedOrFinished() predicate.Predicate {
	final := func(o client.Object) bool {
		vmi, ok := o.(*kubevirtv1.VirtualMachineInstance)
		return ok && vmi.IsFinal()
	}
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return final(e.ObjectNew) && !final(e.ObjectOld) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// disksClaimedBy maps a VM to the cached disks of its namespace it holds a
// claim on. Scanning the claims, rather than trusting the VM's record, also
// finds claims the record no longer shows.
func (r *Releaser) disksClaimedBy(ctx context.Context, o client.Object) []reconcile.Request {
	vm := Name(client.ObjectKeyFromObject(o))
	lists := []client.ObjectList{&corev1.PersistentVolumeClaimList{}}
	if !r.NoDataVolumes {
		lists = append(lists, &cdiv1beta1.DataVolumeList{})
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, list := range lists {
		if err := r.Reader.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list data disks for a virtual machine", "vm", vm)
			continue
		}
		for _, disk := range diskObjects(list) {
			key := client.ObjectKeyFromObject(disk)
			if held, _ := Read(disk).Holds(vm); held && !seen[key] {
				seen[key] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return reqs
}

// disksUsedBy maps a VMI to the disks its volumes are backed by.
func disksUsedBy(_ context.Context, o client.Object) []reconcile.Request {
	vmi, ok := o.(*kubevirtv1.VirtualMachineInstance)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range diskNames(vmi.Spec.Volumes) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: vmi.Namespace, Name: name}})
	}
	return reqs
}

// diskObjects returns the items of a PVC or DataVolume list.
func diskObjects(list client.ObjectList) []client.Object {
	var out []client.Object
	switch l := list.(type) {
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *cdiv1beta1.DataVolumeList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}
