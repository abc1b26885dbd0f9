package lifecycle

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/virtstation/virtstation/api"
)

// SetupWithManager registers the controller: it looks at a managed VM when
// its labels, annotations or spec change, when its VMI changes phase, when
// its activity Lease is written and when a lifecycle ConfigMap changes;
// and at the times Decide asks for.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	c.state = newState()
	if err := register(crmetrics.Registry, c.state); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// A slow guest agent or virt-handler (each call is bounded by
		// callTimeout) holds one worker, not the whole fleet.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(predicate.Or(
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.GenerationChangedPredicate{}))).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(sameName), builder.WithPredicates(vmiPhaseChanged())).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(c.leaseVM)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(c.configVMs)).
		Complete(c)
}

// sameName maps a VMI to its VM.
func sameName(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
}

// vmiPhaseChanged passes VMI creates, deletes, phase changes and pauses
// or unpauses, not the frequent status updates within a phase.
func vmiPhaseChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*kubevirtv1.VirtualMachineInstance)
			n, ok2 := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
			return !ok1 || !ok2 || o.Status.Phase != n.Status.Phase || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
				paused(o) != paused(n)
		},
	}
}

// leaseVM maps an activity Lease of the install namespace to its VM.
func (c *Controller) leaseVM(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != c.Namespace || o.GetLabels()[api.LabelRole] != api.RoleActivity {
		return nil
	}
	ns, name := o.GetAnnotations()[api.AnnotationVMNamespace], o.GetAnnotations()[api.AnnotationVMName]
	if ns == "" || name == "" || api.ActivityLeaseName(ns, name) != o.GetName() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// configVMs maps a lifecycle ConfigMap to the managed VMs it is the
// defaults of: its namespace's, or every namespace's for the install
// namespace's.
func (c *Controller) configVMs(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetName() != api.LifecycleConfigMap {
		return nil
	}
	opts := []client.ListOption{client.MatchingLabels{api.LabelManaged: api.LabelTrue}}
	if o.GetNamespace() != c.Namespace {
		opts = append(opts, client.InNamespace(o.GetNamespace()))
	}
	var vms kubevirtv1.VirtualMachineList
	if err := c.Reader.List(ctx, &vms, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list VMs for lifecycle defaults")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(vms.Items))
	for _, vm := range vms.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}})
	}
	return reqs
}
