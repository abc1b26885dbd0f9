package vmsecret

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/virtstation/virtstation/api"
)

// OwnedSource is a watch of the per-VM Secrets, as metadata only, through a
// cache of its own that holds just Secrets labelled
// app.kubernetes.io/managed-by=virtstation: a change enqueues the
// controlling VM, so an edited or deleted Secret is put back. The manager's
// cache may then be restricted to key Secrets without hiding the per-VM
// ones. The cache is added to mgr and runs on the leader only, with the
// controllers.
func OwnedSource(mgr ctrl.Manager) (source.Source, error) {
	owned, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{api.LabelManagedBy: api.ManagedByValue}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("create cache for per-vm secrets: %w", err)
	}
	if err := mgr.Add(owned); err != nil {
		return nil, fmt.Errorf("add cache for per-vm secrets: %w", err)
	}
	secretMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	toOwner := handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](
		mgr.GetScheme(), mgr.GetRESTMapper(), &kubevirtv1.VirtualMachine{}, handler.OnlyControllerOwner())
	return source.Kind(owned, secretMeta, toOwner), nil
}

// ManagedVMs passes VirtualMachines labelled virtstation.io/managed=true,
// the VMs whose per-VM Secrets the reconcilers write.
func ManagedVMs() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[api.LabelManaged] == api.LabelTrue
	})
}

// keySecretToVMs maps a key Secret to the managed VMs of its namespace for
// which want is true, which r lists: the VMs whose per-VM Secrets carry the
// Secret's keys.
func keySecretToVMs(r client.Reader, want func(*kubevirtv1.VirtualMachine) bool) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var vms kubevirtv1.VirtualMachineList
		if err := r.List(ctx, &vms, client.InNamespace(o.GetNamespace()), client.MatchingLabels{api.LabelManaged: api.LabelTrue}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list virtual machines for an ssh key secret", "secret", client.ObjectKeyFromObject(o))
			return nil
		}
		var reqs []reconcile.Request
		for i := range vms.Items {
			if want(&vms.Items[i]) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
			}
		}
		return reqs
	}
}

// Watches describe a per-VM Secret reconciler's controller: what it
// watches besides the managed VMs and the per-VM Secrets (OwnedSource).
type Watches struct {
	// Name names the controller in logs and metrics.
	Name string
	// VMChanged passes the managed VMs' updates that can change the Secret.
	VMChanged predicate.Predicate
	// KeySecrets passes the events of the key Secrets the Secret carries.
	KeySecrets predicate.Predicate
	// Reader lists the VMs of a key Secret's namespace.
	Reader client.Reader
	// Wants says which of those a key Secret's event enqueues.
	Wants func(*kubevirtv1.VirtualMachine) bool
}

// SetupWithManager registers r on mgr, watching managed VMs (ManagedVMs and
// w.VMChanged), key Secrets (w.KeySecrets: an event enqueues the managed VMs
// of the Secret's namespace that w.Wants) and the per-VM Secrets
// (OwnedSource: an edited or deleted Secret is put back).
func (w Watches) SetupWithManager(mgr ctrl.Manager, r reconcile.Reconciler) error {
	owned, err := OwnedSource(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(w.Name).
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(ManagedVMs(), w.VMChanged)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(keySecretToVMs(w.Reader, w.Wants)), builder.WithPredicates(w.KeySecrets)).
		WatchesRawSource(owned).
		Complete(r)
}
