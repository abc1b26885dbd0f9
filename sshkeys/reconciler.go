package sshkeys

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/vmsecret"
)

// Event reasons.
const (
	// ReasonInvalidKey is a Warning on a key Secret that has lines that are
	// not authorized_keys entries; its note names each one (InvalidNote).
	// Those lines are skipped; the others still apply.
	ReasonInvalidKey = "InvalidSSHKey"
	// ReasonSecretTaken is a Warning on a VM whose "<vm>-ssh-keys" name is
	// held by a Secret virtstation does not manage.
	ReasonSecretTaken = "SSHKeySecretTaken"
	// ReasonSynced is a Normal Event on a VM whose key Secret was created,
	// adopted or rewritten.
	ReasonSynced = "SSHKeysSynced"
)

// eventAction is the Event action of everything this reconciler reports.
const eventAction = "SyncSSHKeys"

// recheckTaken is how often a VM whose Secret name is taken, or still held by
// a deleted VM of the same name, looks again: Secrets virtstation does not
// manage are not watched, so their deletion triggers nothing.
const recheckTaken = time.Minute

// Reconciler keeps the "<vm>-ssh-keys" Secret of every managed VM that Wants
// keys equal to Desired(vm, Collect(key Secrets of the VM's namespace)).
//
// It reads VMs and key Secrets through Reader (a cache) and the per-VM Secret
// through APIReader, right before writing it with Client: the per-VM Secret
// is not a key Secret, so a cache restricted to key Secrets does not hold it,
// and a fresh read keeps optimistic-concurrency conflicts rare. Writes happen
// only when something differs, with the resourceVersion read.
//
// Reconcile is safe for concurrent use.
type Reconciler struct {
	// Client writes the per-VM Secrets.
	Client client.Client
	// Reader is cached: VMs and key Secrets (label selected) are read
	// through it.
	Reader client.Reader
	// APIReader reads the per-VM Secret from the API server:
	// mgr.GetAPIReader(). Nil means Client, which then must not serve
	// Secrets from a cache restricted to key Secrets.
	APIReader client.Reader
	// Recorder emits the Events; mgr.GetEventRecorder(name) returns one.
	Recorder events.EventRecorder

	memo memo
}

// RBAC the reconciler needs (blockOwnerDeletion on a VM-owned Secret needs
// update on virtualmachines/finalizers where OwnerReferencesPermissionEnforcement
// is on):
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler for a VirtualMachine key.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := r.Reader.Get(ctx, req.NamespacedName, &vm); err != nil {
		if apierrors.IsNotFound(err) {
			r.memo.forgetTaken(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get virtual machine: %w", err)
	}
	// A VM being deleted, or one that no longer wants keys, keeps its
	// Secret as it is: it is owned by the VM and garbage-collected with it.
	if vm.DeletionTimestamp != nil || !Wants(&vm) {
		return ctrl.Result{}, nil
	}

	var sources corev1.SecretList
	if err := r.Reader.List(ctx, &sources, client.InNamespace(vm.Namespace), client.MatchingLabelsSelector{Selector: KeySecretSelector()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ssh key secrets: %w", err)
	}
	keys, invalid := Collect(sources.Items)
	r.reportInvalid(vm.Namespace, sources.Items, invalid)
	return r.sync(ctx, &vm, Desired(&vm, keys), len(keys))
}

// sync creates, adopts or updates the VM's Secret to match desired.
func (r *Reconciler) sync(ctx context.Context, vm *kubevirtv1.VirtualMachine, desired *corev1.Secret, n int) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", desired.Name)
	vmKey := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}

	var cur corev1.Secret
	err := r.apiReader().Get(ctx, client.ObjectKeyFromObject(desired), &cur)
	if apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, desired); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Either a race (the next read sees it) or a reader
				// that serves Secrets from a label-restricted cache.
				return ctrl.Result{}, fmt.Errorf("create secret %s: %w (if this repeats, the reconciler's APIReader does not read Secrets from the API server)", desired.Name, err)
			}
			return ctrl.Result{}, fmt.Errorf("create secret %s: %w", desired.Name, err)
		}
		log.V(1).Info("created ssh key secret", "keys", n)
		r.Recorder.Eventf(vm, desired, corev1.EventTypeNormal, ReasonSynced, eventAction, "Secret %s created with %d SSH key(s)", desired.Name, n)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get secret %s: %w", desired.Name, err)
	}

	own, why := vmsecret.Classify(&cur, vm)
	switch own {
	case vmsecret.Foreign:
		if r.memo.takenNews(vmKey, vm.UID, &cur) {
			r.Recorder.Eventf(vm, &cur, corev1.EventTypeWarning, ReasonSecretTaken, eventAction,
				"Secret %s exists and virtstation does not manage it (%s), so SSH keys are not propagated to this VM; rename or delete that Secret", cur.Name, why)
		}
		return ctrl.Result{RequeueAfter: recheckTaken}, nil
	case vmsecret.PreviousVM:
		log.V(1).Info("secret still belongs to a deleted VM of the same name; waiting for garbage collection")
		return ctrl.Result{RequeueAfter: recheckTaken}, nil
	}
	r.memo.forgetTaken(vmKey)

	next, changed := vmsecret.Update(&cur, desired)
	if !changed {
		return ctrl.Result{}, nil
	}
	// next carries the resourceVersion read above: a concurrent writer makes
	// this a Conflict, and the returned error requeues the VM.
	if err := r.Client.Update(ctx, next); err != nil {
		return ctrl.Result{}, fmt.Errorf("update secret %s: %w", desired.Name, err)
	}
	verb := "updated"
	if own == vmsecret.Adoptable {
		verb = "adopted"
	}
	log.V(1).Info(verb+" ssh key secret", "keys", n)
	r.Recorder.Eventf(vm, next, corev1.EventTypeNormal, ReasonSynced, eventAction, "Secret %s %s with %d SSH key(s)", desired.Name, verb, n)
	return ctrl.Result{}, nil
}

// apiReader is where the per-VM Secret is read from.
func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// reportInvalid emits one Warning Event on each key Secret with invalid
// lines, naming every line (InvalidNote), once per Secret version however
// many VMs read it. One Event per line would not do: the events recorder
// merges Events of the same object and reason into one series that shows
// only one of their notes.
func (r *Reconciler) reportInvalid(namespace string, sources []corev1.Secret, invalid []Invalid) {
	byName := map[string][]Invalid{}
	for _, inv := range invalid {
		byName[inv.Secret] = append(byName[inv.Secret], inv)
	}
	keep := map[types.UID]bool{}
	for i := range sources {
		s := &sources[i]
		lines := byName[s.Name]
		if len(lines) == 0 {
			continue
		}
		keep[s.UID] = true
		if !r.memo.invalidNews(s) {
			continue
		}
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonInvalidKey, eventAction, "%s", InvalidNote(lines))
	}
	r.memo.retainInvalid(namespace, keep)
}
