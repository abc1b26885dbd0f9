package audit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policyreport"
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines;virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the audit's controller, which runs on the
// leader only. noDataVolumes: CDI is not installed.
func (a *Auditor) SetupWithManager(mgr ctrl.Manager, noDataVolumes bool) error {
	namespaceOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[api.LabelManaged] == api.LabelTrue })
	// A VM's status changes often and the policies judge its spec and
	// metadata; a status-only change is picked up at the next interval.
	vmChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("policy-audit").
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Watches(&kubevirtv1.VirtualMachine{}, namespaceOf, builder.WithPredicates(managedOnEitherSide(managed), vmChanged)).
		Watches(&corev1.PersistentVolumeClaim{}, namespaceOf).
		WatchesRawSource(source.Channel(a.channel(), handler.Funcs{GenericFunc: a.enqueueAll}))
	if !noDataVolumes {
		b = b.Watches(&cdiv1beta1.DataVolume{}, namespaceOf)
	}
	for _, gvk := range a.Kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Watches(u, namespaceOf, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[policyreport.LabelManagedBy] == policyreport.ManagedBy
		})))
	}
	return b.Complete(a)
}

// managedOnEitherSide passes an update when the VM was or is managed, so a
// VM whose label was removed leaves the report.
func managedOnEitherSide(managed predicate.Predicate) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  managed.Create,
		DeleteFunc:  managed.Delete,
		GenericFunc: managed.Generic,
		UpdateFunc: func(e event.UpdateEvent) bool {
			return managed.Generic(event.GenericEvent{Object: e.ObjectOld}) || managed.Generic(event.GenericEvent{Object: e.ObjectNew})
		},
	}
}

// channel is the source of PolicyChanged's wake-ups.
func (a *Auditor) channel() chan event.GenericEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.policyChanged == nil {
		a.policyChanged = make(chan event.GenericEvent, 1)
	}
	return a.policyChanged
}

// PolicyChanged tells the audit that the policy set or the modes changed:
// every namespace with managed VMs or reports is audited again. It never
// blocks; it fits validate.PolicyLoader.OnChange.
func (a *Auditor) PolicyChanged() {
	select {
	case a.channel() <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{}}:
	default: // one is pending already
	}
}

// enqueueAll queues every namespace that has managed VMs or that the audit
// holds results for.
func (a *Auditor) enqueueAll(ctx context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var vms kubevirtv1.VirtualMachineList
	seen := map[string]bool{}
	if err := a.Reader.List(ctx, &vms, client.MatchingLabels{api.LabelManaged: api.LabelTrue}); err != nil {
		logf.FromContext(ctx).Error(err, "list managed VMs to audit after a policy change")
	}
	for _, vm := range vms.Items {
		seen[vm.Namespace] = true
	}
	a.mu.Lock()
	for ns := range a.namespaces {
		seen[ns] = true
	}
	a.mu.Unlock()
	for ns := range seen {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
	}
}
