package userdata

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/vmsecret"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "user-data"

// SetupWithManager registers the reconciler on mgr. It watches managed
// VirtualMachines (spec, labels, annotations), key Secrets (a change
// enqueues the VMs of the namespace whose keys go through cloud-init), and
// the per-VM Secrets (vmsecret.OwnedSource), so an edited or deleted Secret
// is put back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	owned, err := vmsecret.OwnedSource(mgr)
	if err != nil {
		return err
	}
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[api.LabelManaged] == api.LabelTrue
	})
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	keySecrets := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return sshkeys.KeySecretSelector().Matches(labels.Set(o.GetLabels()))
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(managed, changed)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.vmsWithCloudInitKeys), builder.WithPredicates(keySecrets)).
		WatchesRawSource(owned).
		Complete(r)
}

// vmsWithCloudInitKeys maps a key Secret to the VMs of its namespace whose
// keys go through cloud-init, into their user-data Secret.
func (r *Reconciler) vmsWithCloudInitKeys(ctx context.Context, o client.Object) []reconcile.Request {
	var vms kubevirtv1.VirtualMachineList
	if err := r.Reader.List(ctx, &vms, client.InNamespace(o.GetNamespace()), client.MatchingLabels{api.LabelManaged: api.LabelTrue}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list virtual machines for an ssh key secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	var reqs []reconcile.Request
	for i := range vms.Items {
		vm := &vms.Items[i]
		if vm.Annotations[api.AnnotationSSHPropagation] == api.PropagationCloudInit && ReadsSecret(vm) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(vm)})
		}
	}
	return reqs
}
