package bridge

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// retryStarting is the Retry-After for a VMI that is still starting.
const retryStarting = 5

// target is the VM a session reaches, and its running instance.
type target struct {
	VM  *kubevirtv1.VirtualMachine // nil on KubeVirt's VMI-only paths
	VMI *kubevirtv1.VirtualMachineInstance
}

// resolve reads the VM (when byVM) and its VMI, and explains why a session
// cannot start: not found, stopped, not running yet.
func resolve(ctx context.Context, c client.Reader, namespace, name string, byVM bool) (target, *Problem) {
	var t target
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if byVM {
		vm := &kubevirtv1.VirtualMachine{}
		if err := c.Get(ctx, key, vm); err != nil {
			return t, readProblem(err, "VirtualMachine", namespace, name)
		}
		t.VM = vm
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := c.Get(ctx, key, vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		return t, readProblem(err, "VirtualMachineInstance", namespace, name)
	}
	if err != nil {
		vmi = nil
	}
	t.VMI = vmi
	return t, classify(namespace, name, t.VM, vmi, byVM)
}

// classify is the pure decision: can a console, display or shell be opened?
func classify(namespace, name string, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, byVM bool) *Problem {
	if vmi == nil || vmi.DeletionTimestamp != nil && vmi.Status.Phase != kubevirtv1.Running {
		if byVM {
			return &Problem{Status: http.StatusPreconditionFailed, Reason: ReasonVMStopped,
				Message: fmt.Sprintf("VM %s/%s is stopped; start it (virtctl start %s -n %s) and try again", namespace, name, name, namespace)}
		}
		return problemf(http.StatusNotFound, ReasonVMNotFound, "VirtualMachineInstance %s/%s not found", namespace, name)
	}
	switch vmi.Status.Phase {
	case kubevirtv1.Running:
		return nil
	case kubevirtv1.Succeeded, kubevirtv1.Failed:
		return &Problem{Status: http.StatusPreconditionFailed, Reason: ReasonVMStopped,
			Message: fmt.Sprintf("VM %s/%s has stopped (%s); start it again", namespace, name, vmi.Status.Phase)}
	}
	phase := string(vmi.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	return &Problem{Status: http.StatusServiceUnavailable, Reason: ReasonVMINotRunning, RetryAfter: retryStarting,
		Message: fmt.Sprintf("VM %s/%s is not running yet (phase %s); try again in a few seconds", namespace, name, phase)}
}

func readProblem(err error, kind, namespace, name string) *Problem {
	if apierrors.IsNotFound(err) {
		reason := ReasonVMNotFound
		return problemf(http.StatusNotFound, reason, "%s %s/%s not found", kind, namespace, name)
	}
	return problemf(http.StatusBadGateway, ReasonUpstream, "could not read %s %s/%s from the API server", kind, namespace, name)
}

// guestAddress is where SSH goes: the first interface address KubeVirt
// reports (from the guest agent or the pod network).
func guestAddress(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, i := range vmi.Status.Interfaces {
		if i.IP != "" {
			return i.IP
		}
	}
	return ""
}
