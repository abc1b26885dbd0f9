package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestDialRereadsTheTokenFileAndAsksForPreserveSession(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization")+" "+r.URL.RawQuery)
		c, err := (&websocket.Upgrader{Subprotocols: []string{Subprotocol}}).Upgrade(w, r, nil)
		if err == nil {
			_ = c.Close()
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	// A ServiceAccount token file exists when the bridge starts.
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := NewDialer(&rest.Config{Host: srv.URL, BearerTokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"first", "rotated"} {
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := d.Dial(context.Background(), "ns", "vm", VNC, DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Subprotocol() != Subprotocol {
			t.Errorf("subprotocol %q", c.Subprotocol())
		}
		_ = c.Close()
	}
	if len(seen) != 2 || seen[0] != "Bearer first preserveSession=true" || seen[1] != "Bearer rotated preserveSession=true" {
		t.Fatalf("requests = %q", seen)
	}
}

func TestFailedHandshakesAreClassified(t *testing.T) {
	cases := map[string]struct {
		status int
		want   error
	}{
		"busy":      {http.StatusServiceUnavailable, ErrBusy},
		"not found": {http.StatusNotFound, ErrNotFound},
		"forbidden": {http.StatusForbidden, ErrForbidden},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "no", tc.status)
			}))
			defer srv.Close()
			d, err := NewDialer(&rest.Config{Host: srv.URL, BearerToken: "t"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Dial(context.Background(), "ns", "vm", Console, DialOptions{}); !errors.Is(err, tc.want) {
				t.Fatalf("Dial err = %v, want %v", err, tc.want)
			}
			if err := d.Restart(context.Background(), "ns", "vm"); !errors.Is(err, tc.want) {
				t.Fatalf("Restart err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTakeDisplayAsksKubeVirtToDropTheHolder(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		c, err := (&websocket.Upgrader{Subprotocols: []string{Subprotocol}}).Upgrade(w, r, nil)
		if err == nil {
			_ = c.Close()
		}
	}))
	defer srv.Close()
	d, err := NewDialer(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(context.Background(), "ns", "vm", VNC, DialOptions{TakeDisplay: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if query != "preserveSession=false" {
		t.Fatalf("query = %q, want preserveSession=false", query)
	}
}

func TestGetStreamsUpToItsLimit(t *testing.T) {
	payload := strings.Repeat("p", 1000)
	cases := map[string]struct {
		limit   int64
		chunked bool
		wantErr error
	}{
		"within the limit":               {limit: 1000},
		"over, with a Content-Length":    {limit: 999, wantErr: ErrTooLarge},
		"over, without a Content-Length": {limit: 999, chunked: true, wantErr: ErrTooLarge},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				if !tc.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
				}
				_, _ = io.WriteString(w, payload[:500])
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, payload[500:])
			}))
			defer srv.Close()
			d, err := NewDialer(&rest.Config{Host: srv.URL, BearerToken: "t"})
			if err != nil {
				t.Fatal(err)
			}
			body, ctype, err := d.Get(context.Background(), "/shot", nil, tc.limit)
			if err == nil {
				var b []byte
				b, err = io.ReadAll(body)
				_ = body.Close()
				if err == nil && (string(b) != payload || ctype != "image/png") {
					t.Fatalf("got %d bytes of %q", len(b), ctype)
				}
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestExecCredentialPluginsAuthenticateEveryRequest: a kubeconfig whose user
// runs an exec plugin (as EKS, GKE and OIDC logins do) authenticates the
// WebSocket dials and the plain requests alike.
func TestExecCredentialPluginsAuthenticateEveryRequest(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.Header.Get("Authorization"))
		if websocket.IsWebSocketUpgrade(r) {
			if c, err := (&websocket.Upgrader{Subprotocols: []string{Subprotocol}}).Upgrade(w, r, nil); err == nil {
				_ = c.Close()
			}
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	plugin := filepath.Join(t.TempDir(), "credential-plugin")
	script := "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-exec\"}}'\n"
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := NewDialer(&rest.Config{Host: srv.URL, ExecProvider: &clientcmdapi.ExecConfig{
		Command: plugin, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(context.Background(), "ns", "vm", Console, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := d.Restart(context.Background(), "ns", "vm"); err != nil {
		t.Fatal(err)
	}
	body, _, err := d.Get(context.Background(), "/version", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	_ = body.Close()
	want := []string{"GET Bearer from-exec", "PUT Bearer from-exec", "GET Bearer from-exec"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("requests = %q, want %q", seen, want)
	}
}

// TestRedirectsAreNotFollowed: a redirect from behind the API server (a
// compromised aggregated API, say) does not take the bridge's token to the
// host it names.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
	}))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
	}))
	defer srv.Close()
	d, err := NewDialer(&rest.Config{Host: srv.URL, BearerToken: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Get(context.Background(), "/shot", nil, 100); err == nil {
		t.Error("Get followed or accepted a redirect")
	}
	if err := d.Restart(context.Background(), "ns", "vm"); err == nil {
		t.Error("Restart followed or accepted a redirect")
	}
	if _, err := d.Dial(context.Background(), "ns", "vm", Console, DialOptions{}); err == nil {
		t.Error("Dial followed or accepted a redirect")
	}
	if len(leaked) != 0 {
		t.Fatalf("the redirect's target got %q", leaked)
	}
}
