package bridge

import (
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func vmiIn(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase}}
}

func TestClassify(t *testing.T) {
	deleting := vmiIn(kubevirtv1.Scheduled)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := map[string]struct {
		vmi        *kubevirtv1.VirtualMachineInstance
		wantStatus int
		wantReason string
	}{
		"running":                     {vmi: vmiIn(kubevirtv1.Running)},
		"stopped VM":                  {wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"scheduling":                  {vmi: vmiIn(kubevirtv1.Scheduling), wantStatus: http.StatusServiceUnavailable, wantReason: ReasonVMINotRunning},
		"no phase yet":                {vmi: vmiIn(""), wantStatus: http.StatusServiceUnavailable, wantReason: ReasonVMINotRunning},
		"shut down inside the guest":  {vmi: vmiIn(kubevirtv1.Succeeded), wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"failed":                      {vmi: vmiIn(kubevirtv1.Failed), wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
		"being deleted before it ran": {vmi: deleting, wantStatus: http.StatusPreconditionFailed, wantReason: ReasonVMStopped},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkProblem(t, classify("team-a", "ws1", tc.vmi), tc.wantStatus, tc.wantReason)
		})
	}
}

// TestKubeVirtClassify holds the bridge to virt-api's answers on KubeVirt's
// own paths (pkg/virt-api/rest/console.go and vnc.go in KubeVirt v1.9.0):
// virtctl console retries only on 400.
func TestKubeVirtClassify(t *testing.T) {
	cases := map[string]struct {
		vmi        *kubevirtv1.VirtualMachineInstance
		m          mode
		wantStatus int
		wantReason string
	}{
		"running":               {vmi: vmiIn(kubevirtv1.Running), m: modeConsole},
		"no VMI":                {m: modeVNC, wantStatus: http.StatusNotFound, wantReason: ReasonVMNotFound},
		"scheduling":            {vmi: vmiIn(kubevirtv1.Scheduling), m: modeConsole, wantStatus: http.StatusBadRequest, wantReason: ReasonVMINotRunning},
		"no phase yet, VNC":     {vmi: vmiIn(""), m: modeVNC, wantStatus: http.StatusBadRequest, wantReason: ReasonVMINotRunning},
		"succeeded":             {vmi: vmiIn(kubevirtv1.Succeeded), m: modeConsole, wantStatus: http.StatusBadRequest, wantReason: ReasonVMINotRunning},
		"failed console":        {vmi: vmiIn(kubevirtv1.Failed), m: modeConsole, wantStatus: http.StatusConflict, wantReason: ReasonVMStopped},
		"failed VNC is not 409": {vmi: vmiIn(kubevirtv1.Failed), m: modeVNC, wantStatus: http.StatusBadRequest, wantReason: ReasonVMINotRunning},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkProblem(t, kubeVirtClassify("team-a", "ws1", tc.vmi, tc.m), tc.wantStatus, tc.wantReason)
		})
	}
}

func checkProblem(t *testing.T, p *Problem, wantStatus int, wantReason string) {
	t.Helper()
	switch {
	case wantStatus == 0 && p != nil:
		t.Fatalf("got %v, want a session", p)
	case wantStatus != 0 && (p == nil || p.Status != wantStatus || p.Reason != wantReason):
		t.Fatalf("got %+v, want %d %s", p, wantStatus, wantReason)
	}
}

// FuzzTakeOverAsked holds the take-over decision to its rules for any
// query: KubeVirt's preserveSession counts only on its VNC path, and only a
// take-over takes the display.
func FuzzTakeOverAsked(f *testing.F) {
	for _, q := range []string{"", "preserveSession=false", "preserveSession=true", "takeover=true", "preserveSession=1&takeover=true", "preserveSession=x", "preserveSession"} {
		f.Add(q, false, true)
	}
	f.Fuzz(func(t *testing.T, query string, byVM, vnc bool) {
		m := modeConsole
		if vnc {
			m = modeVNC
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = query
		takeover, takeDisplay := takeOverAsked(r, m, byVM)
		q := r.URL.Query()
		switch {
		case takeDisplay && !takeover:
			t.Fatalf("%q: takes the display without a take-over", query)
		case takeDisplay && (byVM || !vnc):
			t.Fatalf("%q: takes the display on a path that is not KubeVirt's VNC", query)
		case takeover && !takeDisplay && q.Get("takeover") != "true":
			t.Fatalf("%q: a take-over nobody asked for", query)
		case !q.Has("preserveSession") && takeDisplay:
			t.Fatalf("%q: takes the display without preserveSession", query)
		}
	})
}
