package bridge

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// TestShutdownClosesSessionsWithGoingAwayAndWaitsForThem ends a replica's
// ctx, as SIGTERM does: its session closes with 1001, and Wait sees the
// session, which runs on the bridge's own goroutine after its handler
// returned, through to its end.
func TestShutdownClosesSessionsWithGoingAwayAndWaitsForThem(t *testing.T) {
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	srv, err := bridge.NewFromConfig(ctx, bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: "replica-shutdown", LeaseDuration: leaseDuration,
		Options: bridge.Options{PingInterval: time.Second}, Log: logs.logger().WithName("replica-shutdown"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := mustDial(t, hs.URL, vmPath("ws1", "console"), tokens["alice"])
	send(t, c, websocket.BinaryMessage, "still here")
	readUntil(t, c, "STILL HERE")

	cancel()
	ce := closeFrame(t, c)
	if ce.Code != relay.CodeGoingAway || !strings.Contains(ce.Text, "shutting down") {
		t.Fatalf("close = %d %q, want %d shutting down", ce.Code, ce.Text, relay.CodeGoingAway)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := srv.Wait(wctx); err != nil {
		t.Fatalf("Wait: %v; the session did not end", err)
	}
	waitUpstreamClosed(t, virthandler.Console)

	// The stopped replica could not give the Lease back: it is free once
	// the replica's heartbeat lapses. Wait for that, for the tests after.
	deadline := time.Now().Add(leaseDuration + ioTimeout)
	for {
		c, resp, err := dialCLI(t, replicaA.URL, vmPath("ws1", "console"), tokens["alice"])
		if err == nil {
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("console still held after the replica stopped: %s", body(resp))
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitUpstreamClosed(t, virthandler.Console)
}
