package mutate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
)

// ErrForeignSecret means a Secret Virtstation needs exists and belongs to
// someone else. The admission is denied rather than the Secret overwritten.
var ErrForeignSecret = errors.New("secret exists and is not managed by virtstation")

// OwnedSecretError reports that a Secret Virtstation needs is managed by it
// but owned by another VirtualMachine that still exists (the same name,
// another UID).
// The admission is denied rather than that VM's Secret overwritten.
type OwnedSecretError struct {
	// Owner is the live VM ("<ns>/<name>") and UID its UID.
	Owner string
	UID   types.UID
}

// Error implements error.
func (e *OwnedSecretError) Error() string {
	return fmt.Sprintf("secret is owned by VirtualMachine %s (uid %s), which exists", e.Owner, e.UID)
}

// SecretWriter writes the Secrets an admission needs.
type SecretWriter interface {
	// Write creates or updates w.Secret. owner, when it has a UID, becomes
	// the Secret's controller owner.
	Write(ctx context.Context, w SecretWrite, owner *kubevirtv1.VirtualMachine) error
}

// ClientSecretWriter writes Secrets through the API server with optimistic
// concurrency.
type ClientSecretWriter struct {
	Client client.Client
	// Reader reads Secrets directly from the API server: the manager's
	// cache holds only key Secrets.
	Reader client.Reader
}

var _ SecretWriter = ClientSecretWriter{}

// Write implements SecretWriter.
func (c ClientSecretWriter) Write(ctx context.Context, w SecretWrite, owner *kubevirtv1.VirtualMachine) error {
	want := w.Secret.DeepCopy()
	if owner != nil && owner.UID != "" {
		want.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, kubevirtv1.VirtualMachineGroupVersionKind)}
	}
	err := c.Client.Create(ctx, want)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create secret %s: %w", want.Name, err)
	}
	// The adopter or the SSH-key reconciler may update the Secret between
	// our read and write: re-read and retry on a conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Secret
		if err := c.Reader.Get(ctx, client.ObjectKeyFromObject(want), &cur); err != nil {
			return fmt.Errorf("read secret %s: %w", want.Name, err)
		}
		orphaned, err := CheckExistingSecret(&cur, owner, func(name string) (types.UID, bool, error) {
			return c.liveVM(ctx, cur.Namespace, name)
		})
		if err != nil {
			return err
		}
		if w.CreateOnly {
			return nil
		}
		if !orphaned && maps.EqualFunc(cur.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) }) &&
			(len(want.OwnerReferences) == 0 || len(cur.OwnerReferences) > 0) {
			return nil
		}
		cur.Data = want.Data
		if orphaned || len(cur.OwnerReferences) == 0 {
			// A dead owner's reference would have the garbage collector
			// delete the Secret from under this VM.
			cur.OwnerReferences = want.OwnerReferences
		}
		return c.Client.Update(ctx, &cur)
	})
}

// CheckExistingSecret decides whether a Secret Virtstation needs for owner
// may be written over cur, the Secret of that name that exists. It refuses
// a Secret not labelled as Virtstation's (ErrForeignSecret), and one whose
// controller is a VirtualMachine other than owner (by UID) that still
// exists (*OwnedSecretError). orphaned is true when that controller is
// gone: a Secret left by an earlier VM of the same name is taken over. On a
// CREATE owner has no UID yet. liveVM reports the UID of the VM of that name
// in cur's namespace, if it exists. The webhook and render both decide
// through it.
func CheckExistingSecret(cur *corev1.Secret, owner *kubevirtv1.VirtualMachine, liveVM func(name string) (types.UID, bool, error)) (orphaned bool, err error) {
	if cur.Labels[api.LabelManagedBy] != api.ManagedByValue {
		return false, fmt.Errorf("%w: %s/%s", ErrForeignSecret, cur.Namespace, cur.Name)
	}
	ref := metav1.GetControllerOf(cur)
	if ref == nil || ref.Kind != kubevirtv1.VirtualMachineGroupVersionKind.Kind || (owner != nil && ref.UID == owner.UID) {
		return false, nil
	}
	uid, exists, err := liveVM(ref.Name)
	switch {
	case err != nil:
		return false, fmt.Errorf("read owner of secret %s: %w", cur.Name, err)
	case !exists, uid != ref.UID:
		return true, nil
	}
	return false, &OwnedSecretError{Owner: cur.Namespace + "/" + ref.Name, UID: ref.UID}
}

// liveVM reads the UID of a VirtualMachine from the API server.
func (c ClientSecretWriter) liveVM(ctx context.Context, namespace, name string) (types.UID, bool, error) {
	var vm metav1.PartialObjectMetadata
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	switch err := c.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &vm); {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return vm.UID, true, nil
}

// SecretDenial is the admission denial for a failed write of w, when err
// is a verdict (ErrForeignSecret, *OwnedSecretError) rather than a fault.
func SecretDenial(w SecretWrite, err error) (field.ErrorList, bool) {
	if owner := (*OwnedSecretError)(nil); errors.As(err, &owner) {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), fmt.Sprintf(
			"Secret %s/%s belongs to VirtualMachine %s (uid %s), which still exists; Virtstation never overwrites another VM's Secret (rule: secrets; fix: rename this VM, or delete the other one first)",
			w.Secret.Namespace, w.Secret.Name, owner.Owner, owner.UID))}, true
	}
	if errors.Is(err, ErrForeignSecret) {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), fmt.Sprintf(
			"Secret %s/%s already exists and is not managed by virtstation (label %s=%s); Virtstation needs that name for this VM (rule: secrets; fix: rename or remove that Secret, or rename the VM)",
			w.Secret.Namespace, w.Secret.Name, api.LabelManagedBy, api.ManagedByValue))}, true
	}
	return nil, false
}

// checkSecretNames denies an admission whose per-VM Secrets would have
// names the API server refuses: a VM name longer than 244 characters leaves
// no room for the suffix within the 253 a Secret name may have. The names
// are derived from the VM's name alone (by the webhook, the SSH-key
// reconciler, the adopter and the sweeper), so a shortened, hashed name
// would leave those unable to find the Secret again; the user gets the
// limit and the fix instead.
func checkSecretNames(m *mutation) error {
	for _, w := range m.secrets {
		if errs := validation.IsDNS1123Subdomain(w.Secret.Name); len(errs) > 0 {
			m.denied = append(m.denied, field.Invalid(field.NewPath("metadata", "name"), m.in.Name, secretNameDetail(m.in.Name, w.Secret.Name)))
			return nil
		}
	}
	return nil
}

// maxVMNameForSecrets is the longest VM name whose per-VM Secret names
// are valid: 253 less the longest suffix.
var maxVMNameForSecrets = validation.DNS1123SubdomainMaxLength - max(len(UserDataSecretName("")), len(sshkeys.SecretName("")))

// secretNameDetail explains a refused per-VM Secret name.
func secretNameDetail(vm, secret string) string {
	return fmt.Sprintf("Virtstation keeps this VM's data in a Secret named after it (<name>%s, %d characters), over the %d a Secret name may have (rule: secrets; fix: shorten the VM's name to at most %d characters)",
		strings.TrimPrefix(secret, vm), len(secret), validation.DNS1123SubdomainMaxLength, maxVMNameForSecrets)
}
