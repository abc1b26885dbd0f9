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
// cannot start: not found, stopped, not running yet. On KubeVirt's own
// paths (byVM false) the explanation has KubeVirt's status (see kubeVirtClassify).
func resolve(ctx context.Context, c client.Reader, namespace, name string, byVM bool, m mode) (target, *Problem) {
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
	if !byVM {
		return t, kubeVirtClassify(namespace, name, vmi, m)
	}
	return t, classify(namespace, name, vmi)
}

// kubeVirtClassify answers as KubeVirt's virt-api does on its own paths, so
// that KubeVirt's clients behave as they do without the bridge: no VMI is
// 404; a VMI that is not running is 400, on which virtctl console waits and
// retries until its --timeout; a failed VMI's console is 409 (virt-api's
// validateVMIForConsole), on which virtctl gives up at once.
func kubeVirtClassify(namespace, name string, vmi *kubevirtv1.VirtualMachineInstance, m mode) *Problem {
	if vmi == nil {
		return problemf(http.StatusNotFound, ReasonVMNotFound, "VirtualMachineInstance %s/%s not found; start the VM (virtctl start %s -n %s)", namespace, name, name, namespace)
	}
	if vmi.Status.Phase == kubevirtv1.Running {
		return nil
	}
	phase := string(vmi.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	if vmi.Status.Phase == kubevirtv1.Failed && m.name == modeConsole.name {
		return problemf(http.StatusConflict, ReasonVMStopped, "VMI %s/%s has failed; start the VM again", namespace, name)
	}
	return problemf(http.StatusBadRequest, ReasonVMINotRunning, "VMI %s/%s is not running (phase %s); virtctl waits for it with --timeout", namespace, name, phase)
}

// classify is the pure decision on the bridge's own VM paths: can a
// console, display or shell be opened? (The VM exists: resolve read it.)
func classify(namespace, name string, vmi *kubevirtv1.VirtualMachineInstance) *Problem {
	if vmi == nil || vmi.DeletionTimestamp != nil && vmi.Status.Phase != kubevirtv1.Running {
		return &Problem{Status: http.StatusPreconditionFailed, Reason: ReasonVMStopped,
			Message: fmt.Sprintf("VM %s/%s is stopped; start it (virtctl start %s -n %s) and try again", namespace, name, name, namespace)}
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
