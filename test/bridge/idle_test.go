package bridge

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/virthandler"
)

func TestIdleSessionsAreClosedAndCounted(t *testing.T) {
	idle, err := startReplica(testContext(t), "replica-idle", bridge.Options{IdleTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	c := mustDial(t, idle.URL, vmPath("ws1", "console"), tokens["alice"])
	defer waitUpstreamClosed(t, virthandler.Console)
	// Guest output is not user input: the guest prints its banner every
	// half second, and the session still idles out.
	start := time.Now()
	ce := closeFrame(t, c)
	if ce.Code != relay.CodeIdle || !strings.Contains(ce.Text, "without input") {
		t.Fatalf("close = %d %q, want %d idle", ce.Code, ce.Text, relay.CodeIdle)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("closed after %v, before the idle timeout", waited)
	}

	// Metrics name every VM with a live session: they are not served on
	// the sessions' port, which any user reaches.
	if resp, _ := request(t, http.MethodGet, idle.URL+"/metrics", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /metrics on the sessions' port: %s, want 404", resp.Status)
	}
	metrics := scrape(t, idle.URL)
	for _, want := range []string{
		`virtstation_bridge_session_requests_total{mode="console",result="OK"} 1`,
		`virtstation_bridge_session_endings_total{code="4002",mode="console"} 1`,
		`virtstation_bridge_bytes_total{direction="to_client",mode="console"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
