package virthandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Messages virt-api answers with (pkg/virt-api/rest/subresource.go).
const (
	vmNotRunning      = "VM is not running"
	vmAlreadyRunning  = "VM is already running"
	vmiNotRunning     = "VMI is not running"
	vmiGuestAgentErr  = "VMI does not have guest agent connected"
	jsonpatchTestErr  = "jsonpatch test operation does not apply"
	manualRecoveryErr = "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes."
)

// errNoClient is why start and stop fail on a server without Options.Client.
var errNoClient = errors.New("virthandler: no Options.Client to reach the stored VirtualMachines")

// change is what a start or stop does to the stored VM: a JSON patch of
// its spec, or of its status (a state change request for virt-controller).
type change struct {
	patch  []byte
	status bool
}

// start serves PUT .../virtualmachines/{name}/start as virt-api's
// StartVMRequestHandler does.
func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	call := newCall(StartVM, r)
	opts := &kubevirtv1.StartOptions{}
	if serr := decodeBody(r, opts); serr != nil {
		s.fail(w, call, serr)
		return
	}
	vm, vmi, serr := s.fetchVM(r.Context(), call.Namespace, call.Name)
	if serr != nil {
		s.fail(w, call, serr)
		return
	}
	c, serr := startChange(vm, vmi, opts.Paused)
	if serr != nil {
		s.fail(w, call, serr)
		return
	}
	s.apply(w, r, call, vm, c, opts.DryRun, s.opts.OnStart)
}

// stop serves PUT .../virtualmachines/{name}/stop as virt-api's
// StopVMRequestHandler does, except that a gracePeriod is not written to
// the VMI: a Halted VM's stop with one is taken as shorter than the VMI's.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	call := newCall(StopVM, r)
	opts := &kubevirtv1.StopOptions{}
	if serr := decodeBody(r, opts); serr != nil {
		s.fail(w, call, serr)
		return
	}
	vm, vmi, serr := s.fetchVM(r.Context(), call.Namespace, call.Name)
	if serr != nil {
		s.fail(w, call, serr)
		return
	}
	c, serr := stopChange(vm, vmi, opts.GracePeriod != nil)
	if serr != nil {
		s.fail(w, call, serr)
		return
	}
	s.apply(w, r, call, vm, c, opts.DryRun, s.opts.OnStop)
}

// apply writes c to the stored VM, answers 202 and, unless dry run, hands
// the patched VM to hook on a goroutine Close waits for.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, call Call, vm *kubevirtv1.VirtualMachine, c change, dryRun []string, hook func(context.Context, *kubevirtv1.VirtualMachine)) {
	patch := client.RawPatch(types.JSONPatchType, c.patch)
	var err error
	switch {
	case c.patch == nil:
		// A strategy virt-api does not know: nothing changes.
	case c.status:
		err = s.opts.Client.Status().Patch(r.Context(), vm, patch, &client.SubResourcePatchOptions{PatchOptions: client.PatchOptions{DryRun: dryRun}})
	default:
		err = s.opts.Client.Patch(r.Context(), vm, patch, &client.PatchOptions{DryRun: dryRun})
	}
	if err != nil {
		if strings.Contains(err.Error(), jsonpatchTestErr) {
			s.fail(w, call, apierrors.NewConflict(vmResource, call.Name, err))
		} else {
			s.fail(w, call, apierrors.NewInternalError(err))
		}
		return
	}
	call.Status = http.StatusAccepted
	s.calls.add(call)
	w.WriteHeader(http.StatusAccepted)
	if hook != nil && len(dryRun) == 0 && s.enter() {
		go func() {
			defer s.inflight.Done()
			hook(s.ctx, vm)
		}()
	}
}

// fetchVM reads the stored VM (404 as virt-api names it) and its VMI, nil
// when there is none.
func (s *Server) fetchVM(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance, *apierrors.StatusError) {
	if s.opts.Client == nil {
		return nil, nil, apierrors.NewInternalError(errNoClient)
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.opts.Client.Get(ctx, key, vm); apierrors.IsNotFound(err) {
		return nil, nil, apierrors.NewNotFound(vmResource, name)
	} else if err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vm [%s]: %w", name, err))
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.opts.Client.Get(ctx, key, vmi); apierrors.IsNotFound(err) {
		return vm, nil, nil
	} else if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	return vm, vmi, nil
}

// startChange decides a start as virt-api does: Halted sets runStrategy
// Always (or, to start paused, asks virt-controller); Manual and
// RerunOnFailure ask virt-controller through a state change request;
// Always and Once refuse.
func startChange(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, paused bool) (change, *apierrors.StatusError) {
	name := vm.Name
	if vmi != nil && !vmi.IsFinal() && vmi.Status.Phase != kubevirtv1.Unknown && vmi.Status.Phase != kubevirtv1.VmPhaseUnset {
		return change{}, apierrors.NewConflict(vmResource, name, errors.New(vmAlreadyRunning))
	}
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineManualRecoveryRequired && c.Status == corev1.ConditionTrue {
			return change{}, apierrors.NewConflict(vmResource, name, errors.New(manualRecoveryErr)) //nolint:staticcheck // KubeVirt's message, word for word
		}
	}
	data := map[string]string{}
	if paused {
		data[kubevirtv1.StartRequestDataPausedKey] = kubevirtv1.StartRequestDataPausedTrue
	}
	start := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest, Data: data}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return change{}, apierrors.NewInternalError(err)
	}
	switch strategy {
	case kubevirtv1.RunStrategyHalted:
		pausedStart := kubevirtv1.StartStrategyPaused
		// virt-api compares the pointers, so this is true whenever paused.
		if paused && (vm.Spec.Template == nil || vm.Spec.Template.Spec.StartStrategy != &pausedStart) {
			return changeRequest(vm, start)
		}
		return runningChange(vm, true)
	case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
		switch {
		case strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Failed:
			return change{}, apierrors.NewConflict(vmResource, name, fmt.Errorf("%v does not support starting VM from failed state", strategy))
		case strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Succeeded,
			strategy == kubevirtv1.RunStrategyManual && vmi != nil && vmi.IsFinal():
			return changeRequest(vm, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &vmi.UID}, start)
		}
		return changeRequest(vm, start)
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyOnce:
		return change{}, apierrors.NewConflict(vmResource, name, fmt.Errorf("%v does not support manual start requests", strategy))
	}
	// virt-api answers 202 and changes nothing for any other strategy.
	return change{}, nil
}

// stopChange decides a stop as virt-api does: Always and Once set
// runStrategy Halted; Manual and RerunOnFailure ask virt-controller to stop
// the VMI; Halted refuses unless the request shortens the grace period.
func stopChange(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, gracePeriod bool) (change, *apierrors.StatusError) {
	strategy, err := vm.RunStrategy()
	if err != nil {
		return change{}, apierrors.NewInternalError(err)
	}
	running := vmi != nil && !vmi.IsFinal()
	switch strategy {
	case kubevirtv1.RunStrategyHalted:
		if !running {
			return change{}, apierrors.NewConflict(vmResource, vm.Name, errors.New(vmNotRunning))
		}
		if !gracePeriod {
			return change{}, apierrors.NewConflict(vmResource, vm.Name, fmt.Errorf("%v only supports manual stop requests with a shorter graceperiod", strategy))
		}
		return changeRequest(vm, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &vmi.UID})
	case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
		if !running {
			return change{}, apierrors.NewConflict(vmResource, vm.Name, errors.New(vmNotRunning))
		}
		return changeRequest(vm, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &vmi.UID})
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyOnce:
		return runningChange(vm, false)
	}
	return change{}, nil
}

// patchOp is one JSON patch operation, as KubeVirt's patch package writes
// it (value always present, null included).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// runningChange is virt-api's getRunningPatch: test the old runStrategy
// (or spec.running) and replace it.
func runningChange(vm *kubevirtv1.VirtualMachine, running bool) (change, *apierrors.StatusError) {
	strategy := kubevirtv1.RunStrategyHalted
	if running {
		strategy = kubevirtv1.RunStrategyAlways
	}
	ops := []patchOp{{"test", "/spec/running", vm.Spec.Running}, {"replace", "/spec/running", running}}
	if vm.Spec.RunStrategy != nil {
		ops = []patchOp{{"test", "/spec/runStrategy", vm.Spec.RunStrategy}, {"replace", "/spec/runStrategy", strategy}}
	}
	return marshalChange(ops, false)
}

// changeRequest is virt-api's getChangeRequestJson: append state change
// requests to the VM's status, testing the ones already there.
func changeRequest(vm *kubevirtv1.VirtualMachine, changes ...kubevirtv1.VirtualMachineStateChangeRequest) (change, *apierrors.StatusError) {
	var ops []patchOp
	if reflect.DeepEqual(vm.Status, kubevirtv1.VirtualMachineStatus{}) {
		ops = append(ops, patchOp{"add", "/status", kubevirtv1.VirtualMachineStatus{StateChangeRequests: changes}})
	} else {
		ops = append(ops, patchOp{"test", "/status/stateChangeRequests", vm.Status.StateChangeRequests})
		switch {
		case len(vm.Status.StateChangeRequests) == 0:
			ops = append(ops, patchOp{"add", "/status/stateChangeRequests", changes})
		case len(changes) == 1 && changes[0].Action == kubevirtv1.StopRequest:
			ops = append(ops, patchOp{"replace", "/status/stateChangeRequests", changes})
		default:
			return change{}, apierrors.NewInternalError(errors.New("unable to complete request: stop/start already underway"))
		}
	}
	if vm.Status.StartFailure != nil {
		ops = append(ops, patchOp{"remove", "/status/startFailure", nil})
	}
	return marshalChange(ops, true)
}

func marshalChange(ops []patchOp, status bool) (change, *apierrors.StatusError) {
	b, err := json.Marshal(ops)
	if err != nil {
		return change{}, apierrors.NewInternalError(err)
	}
	return change{patch: b, status: status}, nil
}
