package bridge

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/sshbridge"
)

// hello is the first message of an SSH session.
func hello(t *testing.T, fields map[string]any) string {
	t.Helper()
	fields["type"] = "ssh"
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func strangerKey(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block))
}

func TestSSHShellWithKeyAndResize(t *testing.T) {
	c := mustDial(t, replicaA.URL, vmPath("ws1", "ssh"), tokens["alice"])
	send(t, c, websocket.TextMessage, hello(t, map[string]any{"user": sshd1.User, "privateKey": string(sshd1.ClientKeyPEM), "cols": 100, "rows": 30}))
	send(t, c, websocket.BinaryMessage, "echo hello-$((6*7))\n")
	readUntil(t, c, "hello-42")
	send(t, c, websocket.TextMessage, `{"type":"resize","cols":132,"rows":43}`)
	send(t, c, websocket.BinaryMessage, "stty size\n")
	readUntil(t, c, "43 132")

	// The host key is now pinned for ws1, in the bridge's namespace.
	pins, err := kube.CoreV1().ConfigMaps(bridgeNS).List(testContext(t), metav1.ListOptions{
		LabelSelector: sshbridge.VMNamespaceLabel + "=" + userNS + "," + sshbridge.VMNameLabel + "=ws1",
	})
	if err != nil || len(pins.Items) != 1 {
		t.Fatalf("host-key pins of ws1: %v %v", pins, err)
	}
}

func TestSSHRefusalsAreCloseFrames(t *testing.T) {
	cases := map[string]struct {
		vm     string
		hello  func(t *testing.T) string
		code   int
		reason string
	}{
		"wrong key": {vm: "ws1", code: relay.CodeSSHAuthFailed, reason: "refused",
			hello: func(t *testing.T) string {
				return hello(t, map[string]any{"user": sshd1.User, "privateKey": strangerKey(t)})
			}},
		"wrong password": {vm: "ws1", code: relay.CodeSSHAuthFailed, reason: "refused",
			hello: func(t *testing.T) string { return hello(t, map[string]any{"user": sshd1.User, "password": "not-it"}) }},
		"guest not answering": {vm: "noguest", code: relay.CodeSSHUnreachable, reason: "not answering on port 22",
			hello: func(t *testing.T) string { return hello(t, map[string]any{"user": sshd1.User, "password": "x"}) }},
		"bad hello": {vm: "ws1", code: relay.CodeBadHello, reason: "bad first message",
			hello: func(*testing.T) string { return `{"type":"ssh"}` }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustDial(t, replicaB.URL, vmPath(tc.vm, "ssh"), tokens["alice"])
			send(t, c, websocket.TextMessage, tc.hello(t))
			ce := closeFrame(t, c)
			if ce.Code != tc.code || !strings.Contains(ce.Text, tc.reason) {
				t.Fatalf("close = %d %q, want %d with %q", ce.Code, ce.Text, tc.code, tc.reason)
			}
		})
	}
}

func TestSSHHostKeyChangeIsRefusedUntilTheAdminResetsThePin(t *testing.T) {
	login := func() *websocket.Conn {
		c := mustDial(t, replicaA.URL, vmPath("ws1", "ssh"), tokens["bob"])
		send(t, c, websocket.TextMessage, hello(t, map[string]any{"user": sshd1.User, "password": sshd1.Password}))
		return c
	}
	c := login()
	send(t, c, websocket.BinaryMessage, "echo pinned-$((1+1))\n")
	readUntil(t, c, "pinned-2")
	_ = c.Close()

	if err := sshd1.RestartWithNewHostKey(testContext(t)); err != nil {
		t.Fatal(err)
	}
	ce := closeFrame(t, login())
	if ce.Code != relay.CodeSSHHostKeyChanged || !strings.Contains(ce.Text, "host key changed") {
		t.Fatalf("after the host key changed: close %d %q", ce.Code, ce.Text)
	}

	// The admin checks the new key and deletes the pin; the next login
	// trusts the new key.
	name := sshbridge.ConfigMapName(sshbridge.VMRef{Namespace: userNS, Name: "ws1"})
	if err := kube.CoreV1().ConfigMaps(bridgeNS).Delete(testContext(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c = login()
	send(t, c, websocket.BinaryMessage, "echo again-$((2+2))\n")
	readUntil(t, c, "again-4")
}
