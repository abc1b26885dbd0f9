package bridge

import (
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/internal/virthandler"
)

func TestConsoleReachesTheGuestThroughTheAPIServer(t *testing.T) {
	c := mustDial(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"])
	defer func() { _ = c.Close(); waitUpstreamClosed(t, virthandler.Console) }()
	if c.Subprotocol() != virthandler.Subprotocol {
		t.Errorf("subprotocol = %q, want %q", c.Subprotocol(), virthandler.Subprotocol)
	}
	// A terminal resize means nothing to a serial line: the bridge swallows
	// it, so the guest (which echoes in upper case) never sees it.
	send(t, c, websocket.TextMessage, `{"type":"resize","cols":120,"rows":40}`)
	send(t, c, websocket.BinaryMessage, "hello from alice")
	got := readUntil(t, c, "HELLO FROM ALICE")
	if strings.Contains(got, "RESIZE") {
		t.Fatalf("the resize message reached the guest: %q", got)
	}
	// The bridge dialled KubeVirt as its own ServiceAccount.
	calls := handler.Calls()
	last := calls[len(calls)-1]
	if last.Kind != virthandler.Console || last.User != "system:serviceaccount:virtstation-system:virtstation-bridge" {
		t.Fatalf("last subresource call = %+v, want the console as the bridge's ServiceAccount", last)
	}
}

func TestVNCFromABrowserOnKubeVirtsOwnPath(t *testing.T) {
	for name, path := range map[string]string{
		"bridge path":   vmPath("ws1", "vnc"),
		"KubeVirt path": "/apis/subresources.kubevirt.io/v1/namespaces/" + userNS + "/virtualmachineinstances/ws1/vnc",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dialBrowser(t, replicaB.URL, path, tokens["alice"])
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close(); waitUpstreamClosed(t, virthandler.VNC) }()
			if c.Subprotocol() != "binary" {
				t.Errorf("subprotocol = %q, want the one noVNC offered, never the token", c.Subprotocol())
			}
			readUntil(t, c, "RFB 003.008\n") // QEMU's greeting, relayed untouched
			calls := handler.Calls()
			if last := calls[len(calls)-1]; !last.PreserveSession {
				t.Fatalf("VNC was dialled without preserveSession: %+v", last)
			}
		})
	}
}
