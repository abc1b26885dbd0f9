package lifecycle

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "lifecycle"

// Controller is the idle-stop controller; see the package comment. It runs
// under the manager's leader election.
type Controller struct {
	// Client writes the VM's annotations.
	Client client.Client
	// Reader is the manager's cache: VMs, VMIs, Leases and ConfigMaps.
	Reader client.Reader
	// APIReader reads PVCs, which the cache holds only when data disks.
	APIReader client.Reader
	KubeVirt  KubeVirt
	Recorder  events.EventRecorder
	// Namespace is the install namespace: the activity Leases and the
	// cluster's defaults live there.
	Namespace string
	// Identity is who stops VMs, as recorded: the controller's user.
	Identity string
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	state *state
}

func (c *Controller) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Reconcile looks at one VM, acts on Decide's answer and schedules the
// next look.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := c.Reader.Get(ctx, req.NamespacedName, &vm); err != nil {
		if apierrors.IsNotFound(err) {
			c.state.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	o, err := c.observe(ctx, &vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(o)
	if (d.Action == Notice || d.Action == Stop) && c.guestActive(ctx, &vm, &o) {
		d = Decide(o)
	}
	if d.Action == Stop && !o.Policy.StopUnsafe {
		o.DataLoss = c.stopLoss(ctx, &vm)
		d = Decide(o)
	}
	c.state.set(req.NamespacedName, o, d)
	if err := c.act(ctx, &vm, o, d); err != nil {
		return ctrl.Result{}, err
	}
	if d.Next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(d.Next.Sub(o.Now), time.Second)}, nil
}

// observe gathers what Decide needs from the caches.
func (c *Controller) observe(ctx context.Context, vm *kubevirtv1.VirtualMachine) (Observation, error) {
	key := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	o := Observation{Now: c.now(), Policy: api.LifecyclePolicy{Mode: api.ModeOff}}
	if vm.Labels[api.LabelManaged] != api.LabelTrue || vm.DeletionTimestamp != nil {
		// Not ours (any more): nothing is written to it.
		return o, nil
	}
	defaults, err := c.defaults(ctx, vm.Namespace)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "lifecycle defaults: using what parsed")
	}
	// Annotations that do not parse were denied at admission; what is
	// here parsed then, or predates the check and keeps its default.
	o.Policy, _ = api.ParseLifecycle(vm.Annotations, defaults, field.NewPath("metadata", "annotations"))
	if until := o.Policy.KeepRunningUntil; !until.IsZero() {
		o.Policy.KeepRunningUntil = api.EffectiveKeepRunning(until, o.Now, o.Policy.MaxKeepRunning)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	switch err := c.Reader.Get(ctx, key, &vmi); {
	case apierrors.IsNotFound(err):
		o.Running = false
	case err != nil:
		return o, err
	default:
		o.Running, o.Since = running(vm, &vmi)
		c.noteUnpause(key, vm, &vmi, o.Now)
	}
	var lease coordinationv1.Lease
	var leaseRead *coordinationv1.Lease
	switch err := c.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: api.ActivityLeaseName(vm.Namespace, vm.Name)}, &lease); {
	case err == nil:
		leaseRead = &lease
	case !apierrors.IsNotFound(err):
		return o, err
	}
	var keep time.Time
	o.LastActivity, o.Source, keep = leaseActivity(leaseRead, o.Policy.MaxKeepRunning)
	if keep.After(o.Policy.KeepRunningUntil) {
		o.Policy.KeepRunningUntil = keep
	}
	o.KeepRunningUntil = o.Policy.KeepRunningUntil
	if g, ok := c.state.guest(key, vm.UID); ok && g.at.After(o.LastActivity) {
		o.LastActivity, o.Source = g.at, g.source
	}
	if o.Policy.Mode == api.ModeObserve {
		o.StopAt = c.state.observedNotice(key)
	} else {
		o.StopAt = noticeOf(vm)
		// A notice further off than the grace period is not one the
		// controller gave (the annotation is the VM's owner's to edit):
		// it is ignored, and a real one given when due.
		if o.StopAt.After(o.Now.Add(o.Policy.IdleGracePeriod)) {
			o.StopAt = time.Time{}
		}
	}
	rec := record(vm)
	o.Recorded, o.RecordedAction = rec.LastActivity, rec.Action
	return o, nil
}

// guestActive asks the guest agent whether users are logged in (SSH
// sessions among them); if so that is activity now, remembered for this
// VMI, and o is updated. No answer is no signal.
func (c *Controller) guestActive(ctx context.Context, vm *kubevirtv1.VirtualMachine, o *Observation) bool {
	if !o.Running {
		return false
	}
	users, err := c.KubeVirt.Users(ctx, vm.Namespace, vm.Name)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("guest agent gave no user list", "error", err.Error())
		return false
	}
	if len(users) == 0 {
		return false
	}
	names := make([]string, 0, min(len(users), 3))
	for _, u := range users[:min(len(users), 3)] {
		names = append(names, truncate(u.UserName, 32))
	}
	o.LastActivity = o.Now
	o.Source = fmt.Sprintf("guest agent: %d user(s) logged in (%s)", len(users), joinNames(names, len(users)))
	c.state.setGuest(types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}, vm.UID, o.Now, o.Source)
	return true
}

// stopLoss says what a stop of vm would lose, or "": the memory of a
// paused VMI, or what DataLoss finds in the running VMI's volumes (the VM's
// template's when the VMI is not in the cache).
func (c *Controller) stopLoss(ctx context.Context, vm *kubevirtv1.VirtualMachine) string {
	var spec *kubevirtv1.VirtualMachineInstanceSpec
	var vmi kubevirtv1.VirtualMachineInstance
	switch err := c.Reader.Get(ctx, client.ObjectKeyFromObject(vm), &vmi); {
	case err == nil:
		if why := PausedLoss(&vmi); why != "" {
			return why
		}
		spec = &vmi.Spec
	case vm.Spec.Template != nil:
		spec = &vm.Spec.Template.Spec
	}
	return DataLoss(spec, c.claimPhases(ctx, vm.Namespace))
}
