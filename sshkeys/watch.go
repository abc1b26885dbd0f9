package sshkeys

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/vmsecret"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "ssh-keys"

// SetupWithManager registers the reconciler on mgr. It watches
//   - managed VirtualMachines, when their labels or annotations change;
//   - key Secrets, through mgr's cache: a change enqueues every VM of the
//     namespace that Wants keys;
//   - the per-VM Secrets, as metadata only, through a cache of its own that
//     holds just Secrets labelled app.kubernetes.io/managed-by=virtstation:
//     a change enqueues the controlling VM, so an edited or deleted Secret is
//     put back. The manager's cache may then be restricted to key Secrets
//     (KeySecretSelector) without hiding the per-VM ones.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return vmsecret.Watches{
		Name: ControllerName, VMChanged: vmSettingsChanged(), KeySecrets: keySecretEvents(), Reader: r.Reader, Wants: Wants,
	}.SetupWithManager(mgr, r)
}

// vmSettingsChanged passes VM updates that can change Wants; KubeVirt's
// frequent status updates do not.
func vmSettingsChanged() predicate.Predicate {
	return predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
}

// keySecretEvents passes events of key Secrets, including the update that
// removes the label (its keys must go).
func keySecretEvents() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isKeySecretObject(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isKeySecretObject(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return isKeySecretObject(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return isKeySecretObject(e.ObjectOld) || isKeySecretObject(e.ObjectNew)
		},
	}
}

func isKeySecretObject(o client.Object) bool {
	return o != nil && o.GetLabels()[api.LabelSSHPublicKey] == api.LabelTrue
}
