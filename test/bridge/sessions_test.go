package bridge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/virthandler"
)

func TestOneConsoleSessionPerVMAndTakeOverAcrossReplicas(t *testing.T) {
	alice := mustDial(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"])
	send(t, alice, websocket.BinaryMessage, "alice here")
	readUntil(t, alice, "ALICE HERE")

	// bob, on the other replica, is told who holds the console and since when.
	code, st := refusal(t, replicaB.URL, vmPath("ws1", "console"), tokens["bob"])
	if code != http.StatusConflict || st.Reason != "SessionHeld" || st.Holder == nil || st.Holder.User != user("alice") ||
		time.Since(st.Holder.Since) > time.Minute || !strings.Contains(st.Message, "held by "+user("alice")) {
		t.Fatalf("second client: %d %+v, want 409 SessionHeld by alice", code, st)
	}
	// The same user in a second tab is refused too: one session per VM.
	if code, _ := refusal(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"]); code != http.StatusConflict {
		t.Fatalf("alice's second tab: %d, want 409", code)
	}

	// GET sessions shows it to anyone who may see the VM, and no one else.
	resp, b := request(t, http.MethodGet, replicaB.URL+"/api/v1/namespaces/team-a/virtualmachines/ws1/sessions", tokens["bob"])
	var list struct {
		Sessions []struct {
			Mode   string `json:"mode"`
			Holder struct {
				User string `json:"user"`
			} `json:"holder"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(b), &list); resp.StatusCode != http.StatusOK || err != nil ||
		len(list.Sessions) != 1 || list.Sessions[0].Mode != "console" || list.Sessions[0].Holder.User != user("alice") {
		t.Fatalf("sessions: %s %s", resp.Status, b)
	}
	if resp, _ := request(t, http.MethodGet, replicaB.URL+"/api/v1/namespaces/team-a/virtualmachines/ws1/sessions", tokens["eve"]); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("eve listing sessions: %s, want 403", resp.Status)
	}

	// eve may not take over; bob may.
	if resp, _ := request(t, http.MethodPost, replicaB.URL+"/api/v1/namespaces/team-a/virtualmachines/ws1/sessions/console/takeover", tokens["eve"]); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("eve's take-over: %s, want 403", resp.Status)
	}
	if resp, b := request(t, http.MethodPost, replicaB.URL+"/api/v1/namespaces/team-a/virtualmachines/ws1/sessions/console/takeover", tokens["bob"]); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("bob's take-over: %s %s", resp.Status, b)
	}
	ce := closeFrame(t, alice)
	if ce.Code != relay.CodeTakenOver || ce.Text != "taken over by another user ("+user("bob")+")" {
		t.Fatalf("alice's close frame = %d %q, want %d taken over by bob", ce.Code, ce.Text, relay.CodeTakenOver)
	}
	waitUpstreamClosed(t, virthandler.Console)

	// The slot is reserved for bob: alice cannot grab it back first.
	if code, st := refusal(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"]); code != http.StatusConflict || st.Holder.User != user("bob") {
		t.Fatalf("alice after the take-over: %d %+v, want 409 reserved for bob", code, st)
	}
	bob := mustDial(t, replicaB.URL, vmPath("ws1", "console"), tokens["bob"])
	send(t, bob, websocket.BinaryMessage, "bob now")
	readUntil(t, bob, "BOB NOW")

	// When bob leaves, the console is free at once, not after the Lease TTL.
	_ = bob.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = bob.Close()
	deadline := time.Now().Add(leaseDuration)
	for {
		c, resp, err := dialCLI(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"])
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("console still held %v after bob left: %s", leaseDuration, body(resp))
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitUpstreamClosed(t, virthandler.Console)
}

func TestVNCTakeOverInOneDial(t *testing.T) {
	alice, err := dialBrowser(t, replicaA.URL, vmPath("ws1", "vnc"), tokens["alice"])
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, alice, "RFB 003.008\n")

	// A browser sees the holder in the close frame.
	held, err := dialBrowser(t, replicaB.URL, vmPath("ws1", "vnc"), tokens["bob"])
	if err != nil {
		t.Fatal(err)
	}
	if ce := closeFrame(t, held); ce.Code != relay.CodeHTTPBase+http.StatusConflict || !strings.Contains(ce.Text, "held by "+user("alice")) {
		t.Fatalf("held close frame = %d %q", ce.Code, ce.Text)
	}

	// ?takeover=true takes it in one step. KubeVirt (preserveSession)
	// refuses while alice's upstream is still open; the bridge waits it out.
	bob, err := dialBrowser(t, replicaB.URL, vmPath("ws1", "vnc")+"?takeover=true", tokens["bob"])
	if err != nil {
		t.Fatal(err)
	}
	if ce := closeFrame(t, alice); ce.Code != relay.CodeTakenOver {
		t.Fatalf("alice's close frame = %d %q", ce.Code, ce.Text)
	}
	readUntil(t, bob, "RFB 003.008\n")
	_ = bob.Close()
	waitUpstreamClosed(t, virthandler.VNC)
}

func TestVNCHeldOutsideTheBridgeIs409(t *testing.T) {
	// virtctl vnc, straight through the API server, holds the display.
	tlsConfig, err := rest.TLSConfigFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	d := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{virthandler.Subprotocol}}
	direct, resp, err := d.Dial("wss://"+strings.TrimSuffix(strings.TrimPrefix(cp.Config.Host, "https://"), "/")+
		"/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/ws1/vnc?preserveSession=true", nil)
	if err != nil {
		t.Fatalf("virtctl-like dial: %v %s", err, body(resp))
	}
	code, st := refusal(t, replicaA.URL, vmPath("ws1", "vnc"), tokens["alice"])
	_ = direct.Close()
	if code != http.StatusConflict || st.Reason != "HeldOutsideBridge" {
		t.Fatalf("VNC held by virtctl: %d %+v, want 409 HeldOutsideBridge", code, st)
	}
	waitUpstreamClosed(t, virthandler.VNC)
}
