package bridge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
)

func TestRefusalsSayWhatIsWrong(t *testing.T) {
	cases := map[string]struct {
		vm, mode, token string
		code            int
		reason, message string
	}{
		"no token":          {vm: "ws1", mode: "console", code: http.StatusUnauthorized, reason: "Unauthorized", message: "no bearer token"},
		"forged token":      {vm: "ws1", mode: "console", token: "not-a-token", code: http.StatusUnauthorized, reason: "Unauthorized", message: "not accepted"},
		"no permission":     {vm: "ws1", mode: "vnc", token: "eve", code: http.StatusForbidden, reason: "Forbidden", message: "needs get on virtualmachineinstances/vnc in API group subresources.kubevirt.io"},
		"ssh needs console": {vm: "ws1", mode: "ssh", token: "eve", code: http.StatusForbidden, reason: "Forbidden", message: "virtualmachineinstances/console"},
		"VM not found":      {vm: "nope", mode: "console", token: "alice", code: http.StatusNotFound, reason: "VMNotFound", message: "VirtualMachine team-a/nope not found"},
		"VM stopped":        {vm: "off", mode: "vnc", token: "alice", code: http.StatusPreconditionFailed, reason: "VMStopped", message: "virtctl start off"},
		"VMI not running":   {vm: "booting", mode: "console", token: "alice", code: http.StatusServiceUnavailable, reason: "VMINotRunning", message: "phase Scheduling"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token := tc.token
			if tok, ok := tokens[token]; ok {
				token = tok
			}
			code, st := refusal(t, replicaA.URL, vmPath(tc.vm, tc.mode), token)
			if code != tc.code || st.Kind != "Status" || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Fatalf("got %d %+v, want %d %s with %q", code, st, tc.code, tc.reason, tc.message)
			}
		})
	}
}

func TestBrowsersGetRefusalsAsCloseFrames(t *testing.T) {
	// A browser cannot read the status of a failed handshake, so the
	// refusal comes as close code 4000+status with the reason.
	cases := map[string]struct {
		vm, token string
		code      int
		reason    string
	}{
		"no permission": {vm: "ws1", token: "eve", code: relay.CodeHTTPBase + http.StatusForbidden, reason: "Forbidden: "},
		"VM stopped":    {vm: "off", token: "alice", code: relay.CodeHTTPBase + http.StatusPreconditionFailed, reason: "VMStopped: "},
		"forged token":  {vm: "ws1", token: "forged", code: relay.CodeHTTPBase + http.StatusUnauthorized, reason: "Unauthorized: "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token := tc.token
			if tok, ok := tokens[token]; ok {
				token = tok
			}
			c, err := dialBrowser(t, replicaA.URL, vmPath(tc.vm, "console"), token)
			if err != nil {
				t.Fatal(err)
			}
			ce := closeFrame(t, c)
			if ce.Code != tc.code || !strings.HasPrefix(ce.Text, tc.reason) {
				t.Fatalf("close = %d %q, want %d %q…", ce.Code, ce.Text, tc.code, tc.reason)
			}
		})
	}
}

func TestOtherOriginsAreRefusedBeforeTheUpgrade(t *testing.T) {
	h := http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + tokens["alice"]}}
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(replicaA.URL, vmPath("ws1", "console")), h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin dial: %v %s, want 403", err, body(resp))
	}
	if b := body(resp); !strings.Contains(b, "OriginNotAllowed") || !strings.Contains(b, "--allowed-origins") {
		t.Fatalf("body %s does not explain the origin refusal", b)
	}
}

func TestPlainGETIsABadRequest(t *testing.T) {
	resp, b := request(t, http.MethodGet, replicaA.URL+vmPath("ws1", "console"), tokens["alice"])
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "WebSocket") {
		t.Fatalf("plain GET: %s %s", resp.Status, b)
	}
}
