package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/lifecycle/defaults"
)

// defaults reads the VM's namespace's lifecycle defaults (defaults.Read):
// a ConfigMap that does not parse keeps what did and is reported by the
// returned error.
func (c *Controller) defaults(ctx context.Context, namespace string) (api.LifecycleDefaults, error) {
	d, invalid, err := defaults.Read(ctx, c.Reader, c.Namespace, namespace)
	return d, errors.Join(invalid, err)
}

// noteUnpause takes an unpause as activity: a VM whose last record is a
// skip because its VMI was paused, and whose VMI runs unpaused now, was
// taken back by its user (once: the time is remembered with the guest
// agent's, and a controller that restarts takes it again at most once).
// Without it the skip, recorded for this idle period, would hold until
// new input.
func (c *Controller) noteUnpause(key types.NamespacedName, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, now time.Time) {
	rec := record(vm)
	if paused(vmi) || rec.Action != api.IdleActionSkipped || !strings.Contains(rec.Reason, pausedReason) {
		return
	}
	at, err := time.Parse(time.RFC3339, rec.At)
	if err != nil {
		return
	}
	if g, ok := c.state.guest(key, vm.UID); ok && g.at.After(at) {
		return
	}
	c.state.setGuest(key, vm.UID, now, "the VMI was unpaused")
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
