package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// Event reasons.
const (
	ReasonIdleStopPending   = "IdleStopPending"
	ReasonIdleStopWithdrawn = "IdleStopWithdrawn"
	ReasonIdleStopped       = "IdleStopped"
	ReasonIdleStopSkipped   = "IdleStopSkipped"
	ReasonIdleStopObserved  = "IdleStopObserved"
	eventAction             = "IdleStop"
)

// act carries out d on vm: the annotations, the stop and the Events.
func (c *Controller) act(ctx context.Context, vm *kubevirtv1.VirtualMachine, o Observation, d Decision) error {
	key := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	observe := o.Policy.Mode == api.ModeObserve
	switch d.Action {
	case Withdraw:
		return c.withdraw(ctx, vm, o, observe)
	case Notice:
		msg := fmt.Sprintf("idle since %s (%s); stops at %s unless used or kept running",
			formatTime(d.Idle.Add(-o.Policy.IdleTimeout)), sourceOrNone(o.Source), formatTime(d.StopAt))
		if observe {
			c.state.setObservedNotice(key, d.StopAt)
			c.Recorder.Eventf(vm, nil, corev1.EventTypeNormal, ReasonIdleStopObserved, eventAction, "observe mode, would give notice: %s", msg)
			return nil
		}
		if err := c.annotate(ctx, vm, map[string]any{api.AnnotationIdleStopAt: formatTime(d.StopAt)}); err != nil {
			return err
		}
		metrics.notices.Inc()
		c.Recorder.Eventf(vm, nil, corev1.EventTypeWarning, ReasonIdleStopPending, eventAction, "%s", msg)
		return nil
	case Stop:
		return c.stop(ctx, vm, o, observe)
	case Skip:
		rec := c.record(o, api.IdleActionSkipped, "a stop would lose data: "+o.DataLoss+"; set "+api.AnnotationIdleStopUnsafe+"=true to stop it anyway")
		if err := c.annotate(ctx, vm, recordPatch(rec)); err != nil {
			return err
		}
		metrics.skipped.Inc()
		c.Recorder.Eventf(vm, nil, corev1.EventTypeWarning, ReasonIdleStopSkipped, eventAction, "idle, not stopped: %s", rec.Reason)
	}
	return nil
}

func (c *Controller) withdraw(ctx context.Context, vm *kubevirtv1.VirtualMachine, o Observation, observe bool) error {
	key := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	why := "the VM stopped"
	switch {
	case o.Running && o.KeepRunningUntil.After(o.Now):
		why = "kept running until " + formatTime(o.KeepRunningUntil)
	case o.Running:
		why = "activity: " + sourceOrNone(o.Source) + " at " + formatTime(o.LastActivity)
	}
	if observe {
		c.state.setObservedNotice(key, time.Time{})
	}
	// Observe mode too: a notice left from enforce mode goes.
	if vm.Annotations[api.AnnotationIdleStopAt] != "" {
		if err := c.annotate(ctx, vm, map[string]any{api.AnnotationIdleStopAt: nil}); err != nil {
			return err
		}
	}
	if o.Running {
		c.Recorder.Eventf(vm, nil, corev1.EventTypeNormal, ReasonIdleStopWithdrawn, eventAction, "idle stop withdrawn: %s", why)
	}
	return nil
}

// stop stops the VM through KubeVirt (observe mode: records that it
// would) and records why.
func (c *Controller) stop(ctx context.Context, vm *kubevirtv1.VirtualMachine, o Observation, observe bool) error {
	reason := fmt.Sprintf("no activity for %s and no keep-running lease; notice given, grace period of %s over",
		o.Policy.IdleTimeout, o.Policy.IdleGracePeriod)
	if observe {
		rec := c.record(o, api.IdleActionWouldStop, reason)
		if err := c.annotate(ctx, vm, recordPatch(rec)); err != nil {
			return err
		}
		c.state.setObservedNotice(types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}, time.Time{})
		metrics.stopped.WithLabelValues(api.ModeObserve).Inc()
		c.Recorder.Eventf(vm, nil, corev1.EventTypeNormal, ReasonIdleStopObserved, eventAction, "observe mode, would stop: %s", reason)
		return nil
	}
	metrics.writes.Inc()
	if err := c.KubeVirt.Stop(ctx, vm.Namespace, vm.Name); err != nil {
		return fmt.Errorf("stop %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	rec := c.record(o, api.IdleActionStopped, reason)
	metrics.stopped.WithLabelValues(api.ModeEnforce).Inc()
	c.Recorder.Eventf(vm, nil, corev1.EventTypeNormal, ReasonIdleStopped, eventAction, "stopped by %s: %s (last activity %s, %s)",
		rec.By, reason, sourceOrNone(rec.LastActivity), sourceOrNone(rec.Source))
	return c.annotate(ctx, vm, recordPatch(rec))
}

func (c *Controller) record(o Observation, action, reason string) api.IdleStopRecord {
	by := c.Identity
	if by == "" {
		by = "virtstation-lifecycle"
	}
	last := latest(o.LastActivity, o.Since)
	return api.IdleStopRecord{At: formatTime(o.Now), Action: action, Reason: reason, LastActivity: formatTime(last), Source: o.Source, By: by}
}

// recordPatch sets the record and removes the notice (in observe mode, one
// left from enforce mode).
func recordPatch(rec api.IdleStopRecord) map[string]any {
	b, _ := json.Marshal(rec)
	return map[string]any{api.AnnotationIdleStop: string(b), api.AnnotationIdleStopAt: nil}
}

// annotate merge-patches the VM's annotations (nil removes one). It touches
// nothing else, so it never races KubeVirt's writes of spec or status.
func (c *Controller) annotate(ctx context.Context, vm *kubevirtv1.VirtualMachine, set map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return err
	}
	metrics.writes.Inc()
	if err := c.Client.Patch(ctx, vm, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("annotate %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}

func sourceOrNone(s string) string {
	if s == "" {
		return "no activity recorded since it started"
	}
	return s
}
