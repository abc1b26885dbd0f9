package bridge

import (
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/rfb"
)

// slowLink makes every connection the bridge accepts a narrow one: a tiny
// send buffer, so the bridge feels the client's reading pace at once, as
// it would over a congested WAN instead of loopback.
type slowLink struct{ net.Listener }

func (l slowLink) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

func startSlowReplica(t *testing.T, opts bridge.Options) *httptest.Server {
	t.Helper()
	opts.PingInterval = time.Second
	srv, err := bridge.NewFromConfig(testContext(t), bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: "replica-slow", LeaseDuration: leaseDuration, Options: opts,
		Log: logs.logger().WithName("replica-slow"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = slowLink{hs.Listener}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs
}

func TestAdaptiveVNCRewritesEncodingsUnderPressureAndStaysValid(t *testing.T) {
	srv := startSlowReplica(t, bridge.Options{VNCAdaptive: true})
	rc := newRFBClient(t, srv.URL, "")
	defer func() { _ = rc.c.Close(); waitUpstreamClosed(t, virthandler.VNC) }()
	// The client prefers Raw: 1.1 MB per full screen of QEMU's 720x400.
	rc.setEncodings(noVNCEncodings)
	rc.readDelay = 15 * time.Millisecond // about 2 MB/s: a full Raw screen takes half a second
	var seen [][]int32
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		rc.request(false)
		encs, err := rc.screenUpdate(ioTimeout)
		if err != nil {
			t.Fatalf("after %d updates: %v", len(seen), err)
		}
		seen = append(seen, encs)
		if slices.Contains(encs, rfb.EncodingTight) {
			break
		}
	}
	if len(seen) == 0 || !slices.Contains(seen[0], rfb.EncodingRaw) {
		t.Fatalf("first update used %v, want Raw (the client's first choice)", seen)
	}
	last := seen[len(seen)-1]
	if !slices.Contains(last, rfb.EncodingTight) {
		t.Fatalf("encodings per update %v: the controller never moved Tight first under a slow link", seen)
	}
	t.Logf("encodings per update: %v", seen)
}

func TestIdleRepaintArrivesOnlyWithTheController(t *testing.T) {
	for _, tc := range []struct {
		query   string
		repaint bool
	}{{"?adaptive=true", true}, {"?adaptive=false", false}} {
		t.Run(strings.TrimPrefix(tc.query, "?"), func(t *testing.T) {
			rc := newRFBClient(t, replicaA.URL, tc.query)
			defer func() { _ = rc.c.Close(); waitUpstreamClosed(t, virthandler.VNC) }()
			rc.setEncodings([]int32{rfb.EncodingTight, rfb.EncodingZRLE, rfb.EncodingRaw})
			rc.request(false)
			if _, err := rc.screenUpdate(ioTimeout); err != nil {
				t.Fatal(err)
			}
			// The client asks for nothing more; the screen is still.
			_, err := rc.screenUpdate(3 * time.Second)
			if got := err == nil; got != tc.repaint {
				t.Fatalf("an unrequested repaint arrived: %v, want %v (err %v)", got, tc.repaint, err)
			}
		})
	}
}
