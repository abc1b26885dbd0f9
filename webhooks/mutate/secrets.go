package mutate

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// ErrForeignSecret: a Secret Virtstation needs exists and belongs to
// someone else. The admission is denied rather than the Secret overwritten.
var ErrForeignSecret = errors.New("secret exists and is not managed by virtstation")

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
		if cur.Labels[api.LabelManagedBy] != api.ManagedByValue {
			return fmt.Errorf("%w: %s/%s", ErrForeignSecret, cur.Namespace, cur.Name)
		}
		if w.CreateOnly {
			return nil
		}
		if maps.EqualFunc(cur.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) }) &&
			(len(want.OwnerReferences) == 0 || len(cur.OwnerReferences) > 0) {
			return nil
		}
		cur.Data = want.Data
		if len(cur.OwnerReferences) == 0 {
			cur.OwnerReferences = want.OwnerReferences
		}
		return c.Client.Update(ctx, &cur)
	})
}
