package secretgc

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtstation/virtstation/api"
)

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
