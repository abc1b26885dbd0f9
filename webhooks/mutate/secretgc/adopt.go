package secretgc

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// Adopter gives the per-VM user-data Secret the webhook wrote on CREATE
// (when the VM had no UID yet) its VM as controller owner, so it is
// garbage-collected with the VM.
//
// It reads the VM from the manager's cache, whose event started the
// reconcile, and reads the Secret only when the VM refers to it: a VM
// whose user data is inline costs the API server nothing. A Secret the VM
// stopped referring to before it was adopted is left to the Sweeper once
// the VM is gone.
type Adopter struct {
	// Client writes the Secret and reads the VM (from the cache).
	Client client.Client
	// APIReader reads Secrets, which the cache does not hold.
	APIReader client.Reader
}

// SetupWithManager registers the adopter for managed VirtualMachines.
func (a *Adopter) SetupWithManager(mgr ctrl.Manager) error {
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[api.LabelManaged] == api.LabelTrue
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("userdata-secret-adopter").
		// Status updates (KubeVirt writes many) cannot change what to adopt.
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(managed,
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(a)
}

// Reconcile implements reconcile.Reconciler.
func (a *Adopter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := a.Client.Get(ctx, req.NamespacedName, &vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !refersToSecret(&vm, mutate.UserDataSecretName(vm.Name)) {
		return ctrl.Result{}, nil
	}
	var s corev1.Secret
	err := a.APIReader.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: mutate.UserDataSecretName(vm.Name)}, &s)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.Labels[api.LabelManagedBy] != api.ManagedByValue || metav1.GetControllerOf(&s) != nil {
		return ctrl.Result{}, nil
	}
	s.OwnerReferences = append(s.OwnerReferences, *metav1.NewControllerRef(&vm, kubevirtv1.VirtualMachineGroupVersionKind))
	return ctrl.Result{}, a.Client.Update(ctx, &s)
}

// refersToSecret reports whether a cloud-init volume of vm takes its user
// data from the Secret name.
func refersToSecret(vm *kubevirtv1.VirtualMachine, name string) bool {
	if vm.Spec.Template == nil {
		return false
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if src := v.CloudInitNoCloud; src != nil && src.UserDataSecretRef != nil && src.UserDataSecretRef.Name == name {
			return true
		}
		if src := v.CloudInitConfigDrive; src != nil && src.UserDataSecretRef != nil && src.UserDataSecretRef.Name == name {
			return true
		}
	}
	return false
}
