package mutate

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/virtstation/virtstation/api"
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
	if !refersToSecret(&vm, UserDataSecretName(vm.Name)) {
		return ctrl.Result{}, nil
	}
	var s corev1.Secret
	err := a.APIReader.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: UserDataSecretName(vm.Name)}, &s)
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

// Sweeper deletes the per-VM Secrets left behind by admissions that were
// admitted by this webhook and then rejected (by a later webhook, or a
// failed create): Secrets managed by Virtstation, named after a VM, without
// an owner, older than Grace, whose VM does not exist. A Secret whose VM
// exists is left to the Adopter and the SSH-key reconciler, which make the
// VM its owner. Each deletion is logged. A Secret goes between Grace and
// Grace+Every after it was written.
type Sweeper struct {
	Client    client.Client
	APIReader client.Reader
	// Suffixes are the per-VM Secret name suffixes to sweep.
	Suffixes []string
	// Grace is how long a Secret may wait for its VM.
	Grace time.Duration
	// Every is the sweep period.
	Every time.Duration
}

// Start implements manager.Runnable: it sweeps every Every until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		// A sweep cut short by shutdown is not a failure.
		if err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			logf.FromContext(ctx).Error(err, "sweep orphaned secrets")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Sweep runs one pass.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) error {
	var list corev1.SecretList
	if err := s.APIReader.List(ctx, &list, client.MatchingLabels{api.LabelManagedBy: api.ManagedByValue}); err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		vmName, ok := s.vmName(sec.Name)
		if !ok || len(sec.OwnerReferences) > 0 || now.Sub(sec.CreationTimestamp.Time) < s.Grace {
			continue
		}
		err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: sec.Namespace, Name: vmName}, &kubevirtv1.VirtualMachine{})
		if !apierrors.IsNotFound(err) {
			continue // the VM exists (its reconciler adopts the Secret) or we cannot tell
		}
		err = s.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete orphaned secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
		if err == nil {
			logf.FromContext(ctx).Info("deleted orphaned secret: its VM does not exist (an admission that wrote it was rejected)",
				"secret", client.ObjectKeyFromObject(sec), "vm", vmName, "age", now.Sub(sec.CreationTimestamp.Time).Round(time.Second))
		}
	}
	return nil
}

func (s *Sweeper) vmName(secret string) (string, bool) {
	for _, suf := range s.Suffixes {
		if name, ok := strings.CutSuffix(secret, suf); ok && name != "" {
			return name, true
		}
	}
	return "", false
}
