package bridge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// The tests here hold the bridge to KubeVirt's meaning on KubeVirt's paths;
// kubecli_test.go drives the same paths with KubeVirt's own client.

func TestDiscoveryOfTheSubresourceGroup(t *testing.T) {
	resp, b := request(t, http.MethodGet, replicaA.URL+"/apis/subresources.kubevirt.io", "")
	var g metav1.APIGroup
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &g) != nil {
		t.Fatalf("group discovery: %s %s", resp.Status, b)
	}
	if g.PreferredVersion.GroupVersion != "subresources.kubevirt.io/v1" || len(g.Versions) != 2 || g.Versions[1].Version != "v1alpha3" {
		t.Fatalf("group = %+v, want v1 preferred and v1alpha3", g)
	}
	for _, v := range []string{"v1", "v1alpha3"} {
		resp, b := request(t, http.MethodGet, replicaA.URL+"/apis/subresources.kubevirt.io/"+v, "")
		var l metav1.APIResourceList
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &l) != nil {
			t.Fatalf("%s discovery: %s %s", v, resp.Status, b)
		}
		var names []string
		for _, r := range l.APIResources {
			names = append(names, r.Name)
		}
		if l.GroupVersion != "subresources.kubevirt.io/"+v || strings.Join(names, ",") != "virtualmachineinstances/console,virtualmachineinstances/vnc,virtualmachineinstances/vnc/screenshot" {
			t.Fatalf("%s resources = %s %v", v, l.GroupVersion, names)
		}
	}
}

func TestReadingTheVMIAsksRBAC(t *testing.T) {
	url := replicaA.URL + "/apis/kubevirt.io/v1/namespaces/" + userNS + "/virtualmachineinstances/"
	resp, b := request(t, http.MethodGet, url+"ws1", tokens["alice"])
	var vmi kubevirtv1.VirtualMachineInstance
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &vmi) != nil {
		t.Fatalf("alice reads ws1: %s %s", resp.Status, b)
	}
	if vmi.Kind != "VirtualMachineInstance" || vmi.APIVersion != "kubevirt.io/v1" || vmi.Name != "ws1" || vmi.Status.Phase != kubevirtv1.Running {
		t.Fatalf("VMI = %s %s %s %s", vmi.APIVersion, vmi.Kind, vmi.Name, vmi.Status.Phase)
	}
	for name, tc := range map[string]struct {
		vmi, token string
		code       int
		message    string
	}{
		"no role": {vmi: "ws1", token: "eve", code: http.StatusForbidden, message: "get on virtualmachineinstances in API group kubevirt.io"},
		"no VMI":  {vmi: "off", token: "alice", code: http.StatusNotFound, message: "not found"},
		"dot-dot": {vmi: "%2E%2E", token: "alice", code: http.StatusBadRequest, message: "not a valid VM name"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, b := request(t, http.MethodGet, url+tc.vmi, tokens[tc.token])
			if resp.StatusCode != tc.code || !strings.Contains(b, tc.message) {
				t.Fatalf("%s: %s %s, want %d %q", tc.vmi, resp.Status, b, tc.code, tc.message)
			}
		})
	}
	// Read-only: nothing but GET is served there.
	if resp, _ := request(t, http.MethodDelete, url+"ws1", tokens["alice"]); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE of the VMI through the bridge: %s", resp.Status)
	}
}

func TestScreenshotNeedsTheVNCPermission(t *testing.T) {
	resp, b := request(t, http.MethodGet, replicaA.URL+vmiPath("v1", "ws1", "vnc/screenshot"), tokens["eve"])
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(b, "virtualmachineinstances/vnc in API group subresources.kubevirt.io") {
		t.Fatalf("eve's screenshot: %s %s", resp.Status, b)
	}
	resp, b = request(t, http.MethodGet, replicaA.URL+vmiPath("v1", "booting", "vnc/screenshot"), tokens["alice"])
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "VMINotRunning") {
		t.Fatalf("a screenshot of a VMI that is not running: %s %s", resp.Status, b)
	}
}

func TestConsoleOnTheV1alpha3Alias(t *testing.T) {
	c := mustDial(t, replicaA.URL, vmiPath("v1alpha3", "ws1", "console"), tokens["alice"])
	defer func() { _ = c.Close(); waitUpstreamClosed(t, virthandler.Console) }()
	send(t, c, 2, "alias")
	readUntil(t, c, "ALIAS")
}

// TestPreserveSessionIsKubeVirts holds the bridge to virt-api's
// preserveSession: false (virtctl vnc's default) takes the display, true
// keeps it; without it the bridge guards the session.
func TestPreserveSessionIsKubeVirts(t *testing.T) {
	alice := mustDial(t, replicaA.URL, vmiPath("v1", "ws1", "vnc"), tokens["alice"])
	readUntil(t, alice, "RFB 003.008\n")

	for _, q := range []string{"", "?preserveSession=true"} {
		code, st := refusal(t, replicaB.URL, vmiPath("v1", "ws1", "vnc")+q, tokens["bob"])
		if code != http.StatusConflict || st.Reason != "SessionHeld" || !strings.Contains(st.Message, user("alice")) {
			t.Fatalf("bob with %q while alice holds VNC: %d %+v, want 409 SessionHeld naming alice", q, code, st)
		}
	}

	bob := mustDial(t, replicaB.URL, vmiPath("v1", "ws1", "vnc")+"?preserveSession=false", tokens["bob"])
	if ce := closeFrame(t, alice); ce.Code != relay.CodeTakenOver || !strings.Contains(ce.Text, user("bob")) {
		t.Fatalf("alice's close frame = %d %q, want 4001 naming bob", ce.Code, ce.Text)
	}
	readUntil(t, bob, "RFB 003.008\n")
	calls := handler.Calls()
	if last := calls[len(calls)-1]; last.Kind != virthandler.VNC || last.PreserveSession {
		t.Fatalf("bob's take-over reached KubeVirt as %+v, want preserveSession=false", last)
	}
	_ = bob.Close()
	waitUpstreamClosed(t, virthandler.VNC)

	// The take-over needs the VNC permission, as the bridge's own does.
	code, st := refusal(t, replicaA.URL, vmiPath("v1", "ws1", "vnc")+"?preserveSession=false", tokens["eve"])
	if code != http.StatusForbidden || st.Reason != "Forbidden" {
		t.Fatalf("eve's take-over: %d %+v", code, st)
	}
}
