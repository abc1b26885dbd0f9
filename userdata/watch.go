package userdata

import (
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

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
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	keySecrets := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return sshkeys.KeySecretSelector().Matches(labels.Set(o.GetLabels()))
	})
	return vmsecret.Watches{
		Name: ControllerName, VMChanged: changed, KeySecrets: keySecrets, Reader: r.Reader, Wants: cloudInitKeys,
	}.SetupWithManager(mgr, r)
}

// cloudInitKeys says whether vm's keys go through cloud-init, into its
// user-data Secret: a change of a key Secret of its namespace enqueues it.
func cloudInitKeys(vm *kubevirtv1.VirtualMachine) bool {
	return vm.Annotations[api.AnnotationSSHPropagation] == api.PropagationCloudInit && ReadsSecret(vm)
}
