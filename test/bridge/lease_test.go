package bridge

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/internal/virthandler"
)

// leasesOf returns the session Leases the bridge keeps for VM name, by
// mode, read from the API server.
func leasesOf(t *testing.T, name string) map[string]map[string]string {
	t.Helper()
	list, err := kube.CoordinationV1().Leases(bridgeNS).List(testContext(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=virtstation-bridge"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, l := range list.Items {
		// Leases with a role (the VM's activity record) are not sessions.
		if l.Labels["virtstation.io/role"] == "" && l.Annotations["virtstation.io/vm-namespace"] == userNS && l.Annotations["virtstation.io/vm-name"] == name {
			out[l.Annotations["virtstation.io/mode"]] = l.Annotations
		}
	}
	return out
}

// TestNoLeaseForAVMThatDoesNotRun: a dial or a take-over for a VM or VMI
// that does not exist is refused with 404 (412 for a stopped VM), and no
// Lease is written, so users cannot make Leases without bound.
func TestNoLeaseForAVMThatDoesNotRun(t *testing.T) {
	cases := map[string]struct {
		vm   string
		do   func(t *testing.T) int
		want int
	}{
		"dial a VM that does not exist": {vm: "ghost", want: http.StatusNotFound,
			do: func(t *testing.T) int {
				code, _ := refusal(t, replicaA.URL, vmPath("ghost", "ssh"), tokens["alice"])
				return code
			}},
		"dial a VMI that does not exist": {vm: "ghost-vmi", want: http.StatusNotFound,
			do: func(t *testing.T) int {
				code, _ := refusal(t, replicaA.URL, vmiPath("v1", "ghost-vmi", "console"), tokens["alice"])
				return code
			}},
		"take over a VM that does not exist": {vm: "ghost-takeover", want: http.StatusNotFound,
			do: func(t *testing.T) int {
				resp, _ := request(t, http.MethodPost, replicaA.URL+vmPath("ghost-takeover", "sessions/console/takeover"), tokens["alice"])
				return resp.StatusCode
			}},
		"take over a stopped VM": {vm: "off", want: http.StatusPreconditionFailed,
			do: func(t *testing.T) int {
				resp, _ := request(t, http.MethodPost, replicaA.URL+vmPath("off", "sessions/vnc/takeover"), tokens["alice"])
				return resp.StatusCode
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.do(t); got != tc.want {
				t.Fatalf("HTTP %d, want %d", got, tc.want)
			}
			if l := leasesOf(t, tc.vm); len(l) > 0 {
				t.Fatalf("Leases written for %s: %v", tc.vm, l)
			}
		})
	}
}

// TestSessionLeaseNamesTheVMI: the Lease of a session records the uid of
// the VMI the bridge read before writing it.
func TestSessionLeaseNamesTheVMI(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := admin.Get(testContext(t), types.NamespacedName{Namespace: userNS, Name: "ws1"}, vmi); err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, replicaA.URL, vmPath("ws1", "console")+"?takeover=true", tokens["alice"])
	if got := leasesOf(t, "ws1")["console"]["virtstation.io/vmi-uid"]; got != string(vmi.UID) {
		t.Fatalf("the console Lease names VMI %q, want %q", got, vmi.UID)
	}
	_ = c.Close()
	waitUpstreamClosed(t, virthandler.Console)
	waitSessionFree(t, "console")
}
