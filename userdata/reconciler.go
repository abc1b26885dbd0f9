package userdata

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/vmsecret"
)

// Event reasons.
const (
	// ReasonSynced is a Normal Event on a VM whose user-data Secret was
	// created or rewritten.
	ReasonSynced = "UserDataSynced"
	// ReasonSourceMissing is a Warning on a VM whose own user-data Secret
	// (its cloud-init secretRef) does not exist or has no userdata key.
	ReasonSourceMissing = "UserDataSourceMissing"
	// ReasonInvalid is a Warning on a VM whose user-data cannot be merged.
	ReasonInvalid = "UserDataInvalid"
	// ReasonSecretTaken is a Warning on a VM whose "<vm>-userdata" name is
	// held by a Secret virtstation does not manage.
	ReasonSecretTaken = "UserDataSecretTaken"
)

// eventAction is the Event action of everything this reconciler reports.
const eventAction = "SyncUserData"

// recheck is how often a VM whose user's Secret is missing, or whose
// Secret name is taken, looks again: those Secrets are not watched (the
// manager caches only key Secrets), so their creation triggers nothing.
const recheck = 30 * time.Second

// Reconciler keeps the "<vm>-userdata" Secret of every VM that Source says
// needs one equal to Desired. It reads VMs and key Secrets through Reader (a
// cache), and the user's own Secret and the per-VM one through APIReader,
// right before writing with Client. Everything it reads is in the stored
// VM's namespace, and what it writes is named after the stored VM: no
// admission request reaches it.
//
// Reconcile is safe for concurrent use.
type Reconciler struct {
	Client    client.Client
	Reader    client.Reader
	APIReader client.Reader
	Recorder  events.EventRecorder
}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler for a VirtualMachine key.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := r.Reader.Get(ctx, req.NamespacedName, &vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	desired, err := Compute(&vm, func(name string) (*corev1.Secret, error) {
		var s corev1.Secret
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, &s)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return &s, err
	}, func() ([]corev1.Secret, error) {
		var sources corev1.SecretList
		err := r.Reader.List(ctx, &sources, client.InNamespace(vm.Namespace), client.MatchingLabelsSelector{Selector: sshkeys.KeySecretSelector()})
		return sources.Items, err
	})
	var missing *SourceMissingError
	switch {
	case errors.As(err, &missing):
		r.Recorder.Eventf(&vm, nil, corev1.EventTypeWarning, ReasonSourceMissing, eventAction,
			"%v; the VM's Secret %s waits for it, and so does the VM's start", err, SecretName(vm.Name))
		return ctrl.Result{RequeueAfter: recheck}, nil
	case errors.Is(err, errRead):
		return ctrl.Result{}, err
	case err != nil:
		r.Recorder.Eventf(&vm, nil, corev1.EventTypeWarning, ReasonInvalid, eventAction, "Secret %s not written: %v", SecretName(vm.Name), err)
		return ctrl.Result{}, nil
	case desired == nil:
		// A VM that stops needing the Secret keeps it: it is owned by the
		// VM and garbage-collected with it.
		return ctrl.Result{}, nil
	}
	return r.sync(ctx, &vm, desired)
}

// sync creates or updates the VM's Secret to match desired.
func (r *Reconciler) sync(ctx context.Context, vm *kubevirtv1.VirtualMachine, desired *corev1.Secret) (ctrl.Result, error) {
	var cur corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), &cur)
	if apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, desired); err != nil {
			return ctrl.Result{}, fmt.Errorf("create secret %s: %w", desired.Name, err)
		}
		r.Recorder.Eventf(vm, desired, corev1.EventTypeNormal, ReasonSynced, eventAction, "Secret %s created", desired.Name)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get secret %s: %w", desired.Name, err)
	}
	switch own, why := vmsecret.Classify(&cur, vm); own {
	case vmsecret.Foreign:
		r.Recorder.Eventf(vm, &cur, corev1.EventTypeWarning, ReasonSecretTaken, eventAction,
			"Secret %s exists and virtstation does not manage it (%s), so this VM's cloud-init user-data cannot be written; rename or delete that Secret", cur.Name, why)
		return ctrl.Result{RequeueAfter: recheck}, nil
	case vmsecret.PreviousVM:
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	next, changed := vmsecret.Update(&cur, desired)
	if !changed {
		return ctrl.Result{}, nil
	}
	// next carries the resourceVersion read above: a concurrent writer
	// makes this a Conflict, and the returned error requeues the VM.
	if err := r.Client.Update(ctx, next); err != nil {
		return ctrl.Result{}, fmt.Errorf("update secret %s: %w", desired.Name, err)
	}
	r.Recorder.Eventf(vm, next, corev1.EventTypeNormal, ReasonSynced, eventAction, "Secret %s updated", desired.Name)
	return ctrl.Result{}, nil
}
