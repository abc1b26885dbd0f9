package bridge

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

func TestPhaseOf(t *testing.T) {
	halted := vmWith(kubevirtv1.RunStrategyHalted, "")
	always := vmWith(kubevirtv1.RunStrategyAlways, "")
	vmi := func(phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase}}
		for _, c := range conds {
			v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return v
	}
	deleting := vmi(kubevirtv1.Running)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	agentFalse := vmi(kubevirtv1.Running)
	agentFalse.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionFalse}}
	cases := map[string]struct {
		vm          *kubevirtv1.VirtualMachine
		vmi         *kubevirtv1.VirtualMachineInstance
		phase       string
		connectable bool
	}{
		"halted, no VMI":               {halted, nil, PhaseStopped, false},
		"always, no VMI yet":           {always, nil, PhaseStarting, false},
		"manual, printable Starting":   {vmWith(kubevirtv1.RunStrategyManual, kubevirtv1.VirtualMachineStatusStarting), nil, PhaseStarting, false},
		"pending":                      {always, vmi(kubevirtv1.Pending), PhaseStarting, false},
		"scheduling":                   {always, vmi(kubevirtv1.Scheduling), PhaseStarting, false},
		"scheduled":                    {always, vmi(kubevirtv1.Scheduled), PhaseScheduled, false},
		"running, no agent":            {always, vmi(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReady), PhaseBooting, true},
		"running, agent condition off": {always, agentFalse, PhaseBooting, true},
		"agent answers":                {always, vmi(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceAgentConnected), PhaseGuestAnswering, true},
		"ready":                        {always, vmi(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceAgentConnected, kubevirtv1.VirtualMachineInstanceReady), PhaseReady, true},
		"stopping":                     {halted, deleting, PhaseStopping, false},
		"succeeded, halted":            {halted, vmi(kubevirtv1.Succeeded), PhaseStopped, false},
		"succeeded, always restarts":   {always, vmi(kubevirtv1.Succeeded), PhaseStarting, false},
		"failed, manual":               {vmWith(kubevirtv1.RunStrategyManual, ""), vmi(kubevirtv1.Failed), PhaseFailed, false},
		"unschedulable":                {vmWith(kubevirtv1.RunStrategyAlways, kubevirtv1.VirtualMachineStatusUnschedulable), vmi(kubevirtv1.Scheduling), PhaseFailed, false},
		"spec.running true":            {&kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Running: ptr.To(true)}}, nil, PhaseStarting, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := phaseOf(tc.vm, tc.vmi)
			if st.Phase != tc.phase || st.Connectable != tc.connectable || st.Message == "" {
				t.Errorf("phaseOf = %+v, want phase %s, connectable %v, a message", st, tc.phase, tc.connectable)
			}
		})
	}
}

func TestPhaseOfIdleStopAt(t *testing.T) {
	cases := map[string]struct {
		annotation, want string
		unmanaged        bool
	}{
		"none":       {annotation: "", want: ""},
		"UTC":        {annotation: "2026-12-06T18:00:00Z", want: "2026-12-06T18:00:00Z"},
		"offset":     {annotation: "2026-12-06T19:00:00+01:00", want: "2026-12-06T18:00:00Z"},
		"not a time": {annotation: "soon", want: ""},
		// Nobody guards the annotation on a VM the webhook does not see.
		"on an unmanaged VM": {annotation: "2026-12-06T18:00:00Z", want: "", unmanaged: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vm := vmWith(kubevirtv1.RunStrategyAlways, "")
			if !tc.unmanaged {
				vm.Labels = map[string]string{api.LabelManaged: api.LabelTrue}
			}
			if tc.annotation != "" {
				vm.Annotations = map[string]string{api.AnnotationIdleStopAt: tc.annotation}
			}
			if got := phaseOf(vm, nil).IdleStopAt; got != tc.want {
				t.Errorf("idleStopAt %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStartTimes(t *testing.T) {
	var st startTimes
	t0 := time.Unix(1000, 0)
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	st.started(a, t0)
	st.started(b, t0)
	if d, ok := st.connected(a, t0.Add(42*time.Second)); !ok || d != 42*time.Second {
		t.Errorf("connected(a) = %v %v, want 42s", d, ok)
	}
	if _, ok := st.connected(a, t0.Add(43*time.Second)); ok {
		t.Error("a second session counted the same start again")
	}
	// A start long ago is forgotten when the next one is recorded.
	st.started(a, t0.Add(startMemory+time.Minute))
	if _, ok := st.connected(b, t0.Add(startMemory+time.Minute)); ok {
		t.Error("a start older than startMemory was counted")
	}
}

func vmWith(rs kubevirtv1.VirtualMachineRunStrategy, printable kubevirtv1.VirtualMachinePrintableStatus) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(rs)}, Status: kubevirtv1.VirtualMachineStatus{PrintableStatus: printable}}
}
