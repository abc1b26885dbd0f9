package bridge

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
)

// trap listens where the guests of spoof and nopod say they are, on the
// bridge's SSH port, and counts who connects.
func trap(t *testing.T) *atomic.Int32 {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(guestReported, strconv.Itoa(sshPort())))
	if err != nil {
		t.Fatalf("listen where the guest says it is: %v", err)
	}
	var hits atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return &hits
}

// TestSSHNeverDialsTheAddressTheGuestReports: a guest can report any
// address in its VMI's status; the bridge dials its launcher pod's.
func TestSSHNeverDialsTheAddressTheGuestReports(t *testing.T) {
	hits := trap(t)

	// spoof's guest reports guestReported; its launcher pod is where sshd is.
	c := mustDial(t, replicaA.URL, vmPath("spoof", "ssh"), tokens["alice"])
	send(t, c, websocket.TextMessage, hello(t, map[string]any{"user": sshd1.User, "password": sshd1.Password}))
	send(t, c, websocket.BinaryMessage, "echo via-pod-$((3*3))\n")
	readUntil(t, c, "via-pod-9")
	_ = c.Close()

	// nopod's guest reports guestReported, and it has no launcher pod.
	c = mustDial(t, replicaB.URL, vmPath("nopod", "ssh"), tokens["alice"])
	send(t, c, websocket.TextMessage, hello(t, map[string]any{"user": sshd1.User, "password": sshd1.Password}))
	ce := closeFrame(t, c)
	if ce.Code != relay.CodeSSHUnreachable || !strings.Contains(ce.Text, "virt-launcher pod") {
		t.Fatalf("without a launcher pod: close %d %q, want %d naming the pod", ce.Code, ce.Text, relay.CodeSSHUnreachable)
	}

	time.Sleep(100 * time.Millisecond) // let a stray connection be counted
	if n := hits.Load(); n != 0 {
		t.Fatalf("the bridge dialled the address the guest reports %d times", n)
	}
}
