package bridge

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestClassify(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{}
	vmi := func(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase}}
	}
	deleting := vmi(kubevirtv1.Scheduled)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := map[string]struct {
		vmi        *kubevirtv1.VirtualMachineInstance
		byVM       bool
		wantStatus int
		wantReason string
	}{
		"running":                     {vmi: vmi(kubevirtv1.Running), byVM: true},
		"stopped VM":                  {byVM: true, wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"no VMI on KubeVirt's path":   {wantStatus: http.StatusNotFound, wantReason: ReasonVMNotFound},
		"scheduling":                  {vmi: vmi(kubevirtv1.Scheduling), byVM: true, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonVMINotRunning},
		"no phase yet":                {vmi: vmi(""), byVM: true, wantStatus: http.StatusServiceUnavailable, wantReason: ReasonVMINotRunning},
		"shut down inside the guest":  {vmi: vmi(kubevirtv1.Succeeded), byVM: true, wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"failed":                      {vmi: vmi(kubevirtv1.Failed), byVM: true, wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"being deleted before it ran": {vmi: deleting, byVM: true, wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := classify("team-a", "ws1", vm, tc.vmi, tc.byVM)
			switch {
			case tc.wantStatus == 0 && p != nil:
				t.Fatalf("classify = %v, want a session", p)
			case tc.wantStatus != 0 && (p == nil || p.Status != tc.wantStatus || p.Reason != tc.wantReason):
				t.Fatalf("classify = %+v, want %d %s", p, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestGuestAddressIsTheFirstReported(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "a"}, {Name: "b", IP: "10.0.0.7"}, {Name: "c", IP: "10.0.0.8"}},
	}}
	if got := guestAddress(vmi); got != "10.0.0.7" {
		t.Fatalf("guestAddress = %q", got)
	}
}
