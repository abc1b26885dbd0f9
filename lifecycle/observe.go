package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// defaults reads the cluster's lifecycle ConfigMap (in the install
// namespace) and the VM's namespace's over it: a key the namespace does not
// set keeps the cluster's value. A ConfigMap that does not parse keeps what
// did and is reported by the returned error.
func (c *Controller) defaults(ctx context.Context, namespace string) (api.LifecycleDefaults, error) {
	d, _ := api.ParseLifecycleDefaults(nil, nil)
	var errs []error
	for _, ns := range []string{c.Namespace, namespace} {
		var cm corev1.ConfigMap
		err := c.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: api.LifecycleConfigMap}, &cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return d, fmt.Errorf("read %s/%s: %w", ns, api.LifecycleConfigMap, err)
		}
		var ferrs field.ErrorList
		d, ferrs = api.ParseLifecycleDefaultsOver(d, cm.Data, field.NewPath("data"))
		if len(ferrs) > 0 {
			errs = append(errs, fmt.Errorf("ConfigMap %s/%s: %w", ns, api.LifecycleConfigMap, ferrs.ToAggregate()))
		}
	}
	return d, errors.Join(errs...)
}

// running says whether vmi runs for vm and since when.
func running(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, time.Time) {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.Status.Phase != kubevirtv1.Running {
		return false, time.Time{}
	}
	if rs := vm.Spec.RunStrategy; rs != nil && *rs == kubevirtv1.RunStrategyHalted {
		return false, time.Time{}
	}
	since := vmi.CreationTimestamp.Time
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running && t.PhaseTransitionTimestamp.After(since) {
			since = t.PhaseTransitionTimestamp.Time
		}
	}
	return true, since
}

// leaseActivity reads the activity Lease: the last input and its source,
// and the keep-running lease a user took from the browser, capped by max
// from when it was taken (or, when the Lease does not say, its last write).
func leaseActivity(l *coordinationv1.Lease, max time.Duration) (last time.Time, source string, keep time.Time) {
	if l == nil {
		return
	}
	if l.Spec.RenewTime != nil {
		last = l.Spec.RenewTime.Time
	}
	if l.Spec.HolderIdentity != nil {
		source = *l.Spec.HolderIdentity
	}
	until, err := time.Parse(time.RFC3339, l.Annotations[api.AnnotationKeepRunningUntil])
	if err != nil {
		return
	}
	from := last
	if at, err := time.Parse(time.RFC3339, l.Annotations[api.AnnotationKeepRunningAt]); err == nil {
		from = at
	}
	return last, source, api.EffectiveKeepRunning(until, from, max)
}

// record reads the VM's last idle-stop record.
func record(vm *kubevirtv1.VirtualMachine) api.IdleStopRecord {
	var r api.IdleStopRecord
	if v := vm.Annotations[api.AnnotationIdleStop]; v != "" {
		_ = json.Unmarshal([]byte(v), &r)
	}
	return r
}

// noticeOf reads the notice on the VM.
func noticeOf(vm *kubevirtv1.VirtualMachine) time.Time {
	t, err := time.Parse(time.RFC3339, vm.Annotations[api.AnnotationIdleStopAt])
	if err != nil {
		return time.Time{}
	}
	return t
}

// claimPhases reads PVCs through the API server: the cache holds only data
// disks, and this runs once per due stop.
func (c *Controller) claimPhases(ctx context.Context, namespace string) ClaimPhase {
	return func(name string) (corev1.PersistentVolumeClaimPhase, bool) {
		var pvc corev1.PersistentVolumeClaim
		if err := c.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pvc); err != nil {
			return "", false
		}
		return pvc.Status.Phase, true
	}
}
