package bridge

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Phases of a workstation as the browser's progress page and banner show
// it, in the order a start goes through them.
const (
	// PhaseStopped: no instance; the VM starts only if asked.
	PhaseStopped = "stopped"
	// PhaseStarting: asked to run, KubeVirt has not yet scheduled it
	// (no VMI yet, or one Pending or Scheduling).
	PhaseStarting = "starting"
	// PhaseScheduled: a node was chosen; its virt-launcher pod starts.
	PhaseScheduled = "scheduled"
	// PhaseBooting: the VMI runs, its console and display open; the guest's
	// agent has not answered (it may have none).
	PhaseBooting = "booting"
	// PhaseGuestAnswering: the guest agent answers; the VMI is not Ready.
	PhaseGuestAnswering = "guest-answering"
	// PhaseReady: the guest agent answers and the VMI is Ready.
	PhaseReady = "ready"
	// PhaseStopping: the instance is shutting down.
	PhaseStopping = "stopping"
	// PhaseFailed: the instance failed, or KubeVirt cannot start it (the
	// message says why).
	PhaseFailed = "failed"
)

// vmStatus is the body of GET …/status and of POST …/start.
type vmStatus struct {
	Phase   string `json:"phase"`
	Message string `json:"message"`
	// Connectable: the console and display can be opened now (the VMI
	// runs), whatever the guest is doing.
	Connectable bool `json:"connectable"`
	// IdleStopAt is api.AnnotationIdleStopAt, RFC 3339, when the lifecycle
	// gave notice of an idle stop.
	IdleStopAt string `json:"idleStopAt,omitempty"`
	// CanStart, only when stopped: may the caller start it.
	CanStart *bool `json:"canStart,omitempty"`
}

// failedStatuses are the VM printable statuses under which KubeVirt will
// not get the VM running by itself.
var failedStatuses = map[kubevirtv1.VirtualMachinePrintableStatus]bool{
	kubevirtv1.VirtualMachineStatusCrashLoopBackOff:   true,
	kubevirtv1.VirtualMachineStatusUnschedulable:      true,
	kubevirtv1.VirtualMachineStatusErrImagePull:       true,
	kubevirtv1.VirtualMachineStatusImagePullBackOff:   true,
	kubevirtv1.VirtualMachineStatusPvcNotFound:        true,
	kubevirtv1.VirtualMachineStatusDataVolumeError:    true,
	kubevirtv1.VirtualMachineStatusWaitingForReceiver: true,
}

// phaseOf derives a workstation's phase from its VM and VMI (nil when
// there is none): a pure function of what the API server stores.
func phaseOf(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) vmStatus {
	st := vmStatus{IdleStopAt: idleStopAt(vm)}
	printable := vm.Status.PrintableStatus
	if failedStatuses[printable] {
		st.Phase, st.Message = PhaseFailed, fmt.Sprintf("KubeVirt cannot start the VM: %s", printable)
		return st
	}
	if vmi == nil {
		if wantsRunning(vm) || printable == kubevirtv1.VirtualMachineStatusStarting || printable == kubevirtv1.VirtualMachineStatusProvisioning ||
			printable == kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding {
			st.Phase, st.Message = PhaseStarting, "Starting: KubeVirt is creating the instance"
			return st
		}
		st.Phase, st.Message = PhaseStopped, "The workstation is stopped"
		return st
	}
	if vmi.DeletionTimestamp != nil {
		st.Phase, st.Message = PhaseStopping, "The workstation is stopping"
		return st
	}
	switch vmi.Status.Phase {
	case kubevirtv1.Scheduled:
		st.Phase, st.Message = PhaseScheduled, "Scheduled on a node: the machine is being prepared"
	case kubevirtv1.Running:
		st.Connectable = true
		agent, ready := vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceAgentConnected), vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceReady)
		switch {
		case agent && ready:
			st.Phase, st.Message = PhaseReady, "Ready"
		case agent:
			st.Phase, st.Message = PhaseGuestAnswering, "The guest's operating system answers"
		default:
			st.Phase, st.Message = PhaseBooting, "Running: the guest is booting"
		}
	case kubevirtv1.Succeeded:
		st.Phase, st.Message = PhaseStopped, "The workstation has stopped"
		if wantsRunning(vm) {
			st.Phase, st.Message = PhaseStarting, "Starting again: KubeVirt replaces the stopped instance"
		}
	case kubevirtv1.Failed:
		st.Phase, st.Message = PhaseFailed, "The workstation's instance failed"
		if wantsRunning(vm) {
			st.Phase, st.Message = PhaseStarting, "Starting again: KubeVirt replaces the failed instance"
		}
	default: // Pending, Scheduling, Unknown
		st.Phase, st.Message = PhaseStarting, "Starting: waiting for a node"
	}
	return st
}

// wantsRunning says whether the VM's run strategy keeps it running.
func wantsRunning(vm *kubevirtv1.VirtualMachine) bool {
	rs, err := vm.RunStrategy()
	return err == nil && (rs == kubevirtv1.RunStrategyAlways || rs == kubevirtv1.RunStrategyRerunOnFailure || rs == kubevirtv1.RunStrategyOnce)
}

func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// idleStopAt is the VM's pending idle stop, normalised to RFC 3339 UTC;
// empty when there is none or it does not parse (the banner then says
// nothing rather than something wrong).
func idleStopAt(vm *kubevirtv1.VirtualMachine) string {
	v := vm.Annotations[api.AnnotationIdleStopAt]
	// Only the lifecycle controller's notice on a managed VM is one: on
	// any other VM nobody guards the annotation.
	if v == "" || vm.Labels[api.LabelManaged] != api.LabelTrue {
		return ""
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
