package bridge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/virthandler"
)

func TestRefusalsSayWhatIsWrong(t *testing.T) {
	cases := map[string]struct {
		vm, mode, token string
		path            string // instead of vm and mode
		code            int
		reason, message string
	}{
		"no token":              {vm: "ws1", mode: "console", code: http.StatusUnauthorized, reason: "Unauthorized", message: "no bearer token"},
		"forged token":          {vm: "ws1", mode: "console", token: "not-a-token", code: http.StatusUnauthorized, reason: "Unauthorized", message: "not accepted"},
		"no permission":         {vm: "ws1", mode: "vnc", token: "eve", code: http.StatusForbidden, reason: "Forbidden", message: "needs get on virtualmachineinstances/vnc in API group subresources.kubevirt.io"},
		"ssh needs portforward": {vm: "ws1", mode: "ssh", token: "eve", code: http.StatusForbidden, reason: "Forbidden", message: "virtualmachineinstances/portforward"},
		"VM not found":          {vm: "nope", mode: "console", token: "alice", code: http.StatusNotFound, reason: "VMNotFound", message: "VirtualMachine team-a/nope not found"},
		"VM stopped":            {vm: "off", mode: "vnc", token: "alice", code: http.StatusPreconditionFailed, reason: "VMStopped", message: "virtctl start off"},
		"VMI not running":       {vm: "booting", mode: "console", token: "alice", code: http.StatusServiceUnavailable, reason: "VMINotRunning", message: "phase Scheduling"},
		// On KubeVirt's paths the statuses are virt-api's: virtctl console
		// waits and retries on 400 only.
		"KubeVirt's path, VMI not running": {path: vmiPath("v1", "booting", "console"), token: "alice", code: http.StatusBadRequest, reason: "VMINotRunning", message: "phase Scheduling"},
		"KubeVirt's path, no VMI":          {path: vmiPath("v1alpha3", "off", "vnc"), token: "alice", code: http.StatusNotFound, reason: "VMNotFound", message: "team-a/off not found"},
		"dot-dot VM name":                  {path: "/api/v1/namespaces/" + userNS + "/virtualmachines/%2E%2E/console", token: "alice", code: http.StatusBadRequest, reason: "BadRequest", message: `".." is not a valid VM name`},
		"dot-dot on KubeVirt's path":       {path: "/apis/subresources.kubevirt.io/v1/namespaces/" + userNS + "/virtualmachineinstances/%2E%2E/vnc", token: "alice", code: http.StatusBadRequest, reason: "BadRequest", message: "not a valid VM name"},
		"upper-case namespace":             {path: "/apis/subresources.kubevirt.io/v1/namespaces/Team-A/virtualmachineinstances/ws1/console", token: "alice", code: http.StatusBadRequest, reason: "BadRequest", message: "not a valid namespace name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token := tc.token
			if tok, ok := tokens[token]; ok {
				token = tok
			}
			path := tc.path
			if path == "" {
				path = vmPath(tc.vm, tc.mode)
			}
			code, st := refusal(t, replicaA.URL, path, token)
			if code != tc.code || st.Kind != "Status" || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Fatalf("got %d %+v, want %d %s with %q", code, st, tc.code, tc.reason, tc.message)
			}
		})
	}
}

func TestBrowsersGetRefusalsAsCloseFrames(t *testing.T) {
	// A browser cannot read the status of a failed handshake, so the
	// refusal comes as close code 4000+status with the reason: to the
	// built-in client (its token in the subprotocol) and to any page that
	// sends an Origin, such as KubeVirt Manager's, whose proxy adds the token
	// and which offers no subprotocol.
	cases := map[string]struct {
		path, token string
		kubeVirtUI  bool // no subprotocol, the token in the header
		origin      string
		code        int
		reason      string
	}{
		"no permission":            {path: vmPath("ws1", "console"), token: "eve", code: relay.CodeHTTPBase + http.StatusForbidden, reason: "Forbidden: "},
		"VM stopped":               {path: vmPath("off", "console"), token: "alice", code: relay.CodeHTTPBase + http.StatusPreconditionFailed, reason: "VMStopped: "},
		"forged token":             {path: vmPath("ws1", "console"), token: "forged", code: relay.CodeHTTPBase + http.StatusUnauthorized, reason: "Unauthorized: "},
		"KubeVirt UI, no role":     {path: vmiPath("v1alpha3", "ws1", "vnc"), token: "eve", kubeVirtUI: true, code: relay.CodeHTTPBase + http.StatusForbidden, reason: "Forbidden: "},
		"KubeVirt UI, not running": {path: vmiPath("v1alpha3", "booting", "console"), token: "alice", kubeVirtUI: true, code: relay.CodeHTTPBase + http.StatusBadRequest, reason: "VMINotRunning: "},
		"KubeVirt UI, no token":    {path: vmiPath("v1", "ws1", "console"), kubeVirtUI: true, code: relay.CodeHTTPBase + http.StatusUnauthorized, reason: "Unauthorized: "},
		"another origin":           {path: vmiPath("v1", "ws1", "console"), token: "alice", kubeVirtUI: true, origin: "https://evil.example", code: relay.CodeHTTPBase + http.StatusForbidden, reason: "OriginNotAllowed: "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token := tc.token
			if tok, ok := tokens[token]; ok {
				token = tok
			}
			var c *websocket.Conn
			if tc.kubeVirtUI {
				origin := tc.origin
				if origin == "" {
					origin = replicaA.URL
				}
				h := http.Header{"Origin": {origin}}
				if token != "" {
					h.Set("Authorization", "Bearer "+token)
				}
				conn, resp, err := websocket.DefaultDialer.Dial(wsURL(replicaA.URL, tc.path), h)
				if err != nil {
					t.Fatalf("a page's handshake was not upgraded: %v (%s)", err, body(resp))
				}
				t.Cleanup(func() { _ = conn.Close() })
				c = conn
			} else {
				var err error
				if c, err = dialBrowser(t, replicaA.URL, tc.path, token); err != nil {
					t.Fatal(err)
				}
			}
			ce := closeFrame(t, c)
			if ce.Code != tc.code || !strings.HasPrefix(ce.Text, tc.reason) {
				t.Fatalf("close = %d %q, want %d %q…", ce.Code, ce.Text, tc.code, tc.reason)
			}
		})
	}
}

func TestOtherOriginsLearnOnlyTheRefusal(t *testing.T) {
	h := http.Header{"Origin": {"https://evil.example"}, "Authorization": {"Bearer " + tokens["alice"]}}
	c, resp, err := websocket.DefaultDialer.Dial(wsURL(replicaA.URL, vmPath("ws1", "console")), h)
	if err != nil {
		t.Fatalf("cross-origin dial: %v %s, want an upgrade and a close frame", err, body(resp))
	}
	defer func() { _ = c.Close() }()
	ce := closeFrame(t, c)
	if ce.Code != relay.CodeHTTPBase+http.StatusForbidden || !strings.Contains(ce.Text, "OriginNotAllowed") || !strings.Contains(ce.Text, "--allowed-origins") {
		t.Fatalf("close = %d %q, want 4403 naming --allowed-origins", ce.Code, ce.Text)
	}
	if n := handler.Open(userNS, "ws1", virthandler.Console); n != 0 {
		t.Fatalf("a refused origin reached the console: %d upstream connections", n)
	}
}

func TestPlainGETIsABadRequest(t *testing.T) {
	resp, b := request(t, http.MethodGet, replicaA.URL+vmPath("ws1", "console"), tokens["alice"])
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "WebSocket") {
		t.Fatalf("plain GET: %s %s", resp.Status, b)
	}
}
