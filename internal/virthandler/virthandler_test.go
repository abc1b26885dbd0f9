package virthandler

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/internal/testenv"
)

// ioTimeout bounds each exchange in these tests.
const ioTimeout = 10 * time.Second

// fixture is a server behind a front-proxy CA, a client holding the proxy's
// certificate, and VMI default/vm1 wired to unix echo servers.
type fixture struct {
	srv    *Server
	tls    *tls.Config // the front proxy's client side
	target Target
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, Options{})
}

// newFixtureWith is newFixture with opts besides the front proxy's.
func newFixtureWith(t *testing.T, opts Options) *fixture {
	t.Helper()
	fp, err := testenv.NewFrontProxy(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts.FrontProxyCA, opts.AllowedNames = fp.CA, []string{testenv.FrontProxyClientName}
	srv, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	cert, err := fp.ClientCertificate()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CABundle())
	dir := t.TempDir()
	target := Target{
		Console: startEcho(t, filepath.Join(dir, "serial.sock"), "console:"),
		VNC:     startEcho(t, filepath.Join(dir, "vnc.sock"), "vnc:"),
	}
	srv.Register("default", "vm1", target)
	return &fixture{srv: srv, tls: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, target: target}
}

// startEcho serves a unix socket that echoes each read prefixed with prefix,
// so a test can tell which socket answered.
func startEcho(t *testing.T, path, prefix string) string {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(append([]byte(prefix), buf[:n]...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return path
}

// dial opens a subresource WebSocket as the front proxy would for user.
func (f *fixture) dial(t *testing.T, path, user string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: f.tls, Subprotocols: []string{Subprotocol}, HandshakeTimeout: ioTimeout}
	h := http.Header{"X-Remote-User": {user}, "X-Remote-Group": {"system:authenticated", "team"}}
	ws, resp, err := d.Dial("wss://"+f.srv.Addr()+path, h)
	if err == nil {
		t.Cleanup(func() { _ = ws.Close() })
	}
	return ws, resp, err
}

func (f *fixture) mustDial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	ws, resp, err := f.dial(t, path, "alice")
	if err != nil {
		t.Fatalf("dial %s: %v (%s)", path, err, statusOf(resp))
	}
	return ws
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
}

func (f *fixture) client() *http.Client {
	return &http.Client{Timeout: ioTimeout, Transport: &http.Transport{TLSClientConfig: f.tls}}
}

const (
	consolePath = basePath + "/namespaces/default/virtualmachineinstances/vm1/console"
	vncPath     = basePath + "/namespaces/default/virtualmachineinstances/vm1/vnc"
	restartPath = basePath + "/namespaces/default/virtualmachines/vm1/restart"
)

// roundTrip sends msg and reads one message back.
func roundTrip(t *testing.T, ws *websocket.Conn, msg string) string {
	t.Helper()
	if err := ws.SetWriteDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	if err := ws.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	typ, got, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.BinaryMessage {
		t.Errorf("message type %d, want binary", typ)
	}
	return string(got)
}

// expectClosed asserts the server ended ws.
func expectClosed(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	if err := ws.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	_, _, err := ws.ReadMessage()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open (read: %v)", err)
	}
}

func waitOpen(t *testing.T, srv *Server, kind Kind, want int) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for srv.Open("default", "vm1", kind) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s connections open: %d, want %d", kind, srv.Open("default", "vm1", kind), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamPipesToTheRegisteredSocket(t *testing.T) {
	f := newFixture(t)
	cases := map[string]struct {
		path, kind, prefix string
	}{
		"console": {consolePath, "console", "console:"},
		"vnc":     {vncPath, "vnc", "vnc:"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := f.mustDial(t, tc.path)
			if ws.Subprotocol() != Subprotocol {
				t.Errorf("subprotocol %q, want %q", ws.Subprotocol(), Subprotocol)
			}
			if got := roundTrip(t, ws, "hello"); got != tc.prefix+"hello" {
				t.Errorf("echo %q, want %q", got, tc.prefix+"hello")
			}
			// Text messages are bytes too, as virt-handler treats them.
			if err := ws.WriteMessage(websocket.TextMessage, []byte("txt")); err != nil {
				t.Fatal(err)
			}
			if _, got, err := ws.ReadMessage(); err != nil || string(got) != tc.prefix+"txt" {
				t.Errorf("echo of a text message: %q, %v", got, err)
			}
			calls := f.srv.Calls()
			last := calls[len(calls)-1]
			if last.Kind != Kind(tc.kind) || last.User != "alice" || last.Status != http.StatusSwitchingProtocols ||
				strings.Join(last.Groups, ",") != "system:authenticated,team" {
				t.Errorf("recorded call %+v, want a %s call by alice (groups system:authenticated,team) answered 101", last, tc.kind)
			}
		})
	}
}

func TestStreamRefusals(t *testing.T) {
	f := newFixture(t)
	f.srv.Register("default", "headless", Target{Console: f.target.Console})
	cases := map[string]struct {
		path string
		want int
	}{
		"unknown VMI":           {basePath + "/namespaces/default/virtualmachineinstances/nope/vnc", http.StatusNotFound},
		"unknown namespace":     {basePath + "/namespaces/other/virtualmachineinstances/vm1/console", http.StatusNotFound},
		"VMI without a display": {basePath + "/namespaces/default/virtualmachineinstances/headless/vnc", http.StatusBadRequest},
		"unknown subresource":   {basePath + "/namespaces/default/virtualmachineinstances/vm1/usbredir", http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, resp, err := f.dial(t, tc.path, "alice")
			if err == nil || resp == nil || resp.StatusCode != tc.want {
				t.Fatalf("dial: %v (%s), want HTTP %d", err, statusOf(resp), tc.want)
			}
		})
	}
}

func TestNewConnectionDisplacesTheOld(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		kind Kind
		path string
	}{{Console, consolePath}, {VNC, vncPath}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			first := f.mustDial(t, tc.path)
			roundTrip(t, first, "1")
			second := f.mustDial(t, tc.path)
			expectClosed(t, first)
			if got := roundTrip(t, second, "2"); !strings.HasSuffix(got, "2") {
				t.Errorf("second connection echo %q", got)
			}
			waitOpen(t, f.srv, tc.kind, 1)
		})
	}
}

func TestPreserveSession(t *testing.T) {
	f := newFixture(t)
	first := f.mustDial(t, vncPath+"?preserveSession=true")

	_, resp, err := f.dial(t, vncPath+"?preserveSession=true", "bob")
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second VNC with preserveSession: %v (%s), want HTTP 503", err, statusOf(resp))
	}
	var status metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil || status.Code != http.StatusServiceUnavailable {
		t.Errorf("503 body: %+v, %v; want a metav1.Status", status, err)
	}
	if got := roundTrip(t, first, "still"); got != "vnc:still" {
		t.Errorf("first connection after the refused one: %q", got)
	}
	// preserveSession guards VNC only; the console is a separate session.
	roundTrip(t, f.mustDial(t, consolePath+"?preserveSession=true"), "c")

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, f.srv, VNC, 0)
	roundTrip(t, f.mustDial(t, vncPath+"?preserveSession=true"), "again")

	var preserved []string
	for _, c := range f.srv.Calls() {
		if c.Kind == VNC && c.PreserveSession {
			preserved = append(preserved, c.User+":"+http.StatusText(c.Status))
		}
	}
	want := "alice:Switching Protocols,bob:Service Unavailable,alice:Switching Protocols"
	if got := strings.Join(preserved, ","); got != want {
		t.Errorf("VNC calls with preserveSession: %s, want %s", got, want)
	}
}

func TestUnregisterEndsConnections(t *testing.T) {
	f := newFixture(t)
	ws := f.mustDial(t, consolePath)
	roundTrip(t, ws, "x")
	f.srv.Unregister("default", "vm1")
	expectClosed(t, ws)
	waitOpen(t, f.srv, Console, 0)
	if _, resp, err := f.dial(t, consolePath, "alice"); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("dial after Unregister: %v (%s), want 404", err, statusOf(resp))
	}
}

func TestRestart(t *testing.T) {
	f := newFixture(t)
	cases := map[string]struct {
		method, path, body string
		want               int
	}{
		"no body":               {http.MethodPut, restartPath, "", http.StatusAccepted},
		"force restart":         {http.MethodPut, restartPath, `{"gracePeriodSeconds":0}`, http.StatusAccepted},
		"positive grace period": {http.MethodPut, restartPath, `{"gracePeriodSeconds":5}`, http.StatusBadRequest},
		"not JSON":              {http.MethodPut, restartPath, `{`, http.StatusBadRequest},
		"unknown VM":            {http.MethodPut, basePath + "/namespaces/default/virtualmachines/nope/restart", "", http.StatusNotFound},
		"wrong method":          {http.MethodPost, restartPath, "", http.StatusMethodNotAllowed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "https://"+f.srv.Addr()+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Remote-User", "system:serviceaccount:virtstation:bridge")
			resp, err := f.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	restarts := f.srv.Restarts()
	if len(restarts) != 2 {
		t.Fatalf("accepted restarts %+v, want 2", restarts)
	}
	forced := 0
	for _, r := range restarts {
		if r.User != "system:serviceaccount:virtstation:bridge" || r.Namespace != "default" || r.Name != "vm1" || r.RestartOptions == nil {
			t.Fatalf("recorded restart %+v", r)
		}
		if g := r.RestartOptions.GracePeriodSeconds; g != nil && *g == 0 {
			forced++
		}
	}
	if forced != 1 {
		t.Errorf("restarts with gracePeriodSeconds 0: %d, want 1", forced)
	}
}

func TestOnlyTheFrontProxyGetsIn(t *testing.T) {
	f := newFixture(t)
	anonymous := &tls.Config{RootCAs: f.tls.RootCAs, MinVersion: tls.VersionTLS12}
	cases := map[string]struct {
		tls  *tls.Config
		path string
		want int
	}{
		"front proxy reads discovery": {f.tls, basePath, http.StatusOK},
		"anonymous reads discovery":   {anonymous, basePath, http.StatusUnauthorized},
		"anonymous dials the console": {anonymous, consolePath, http.StatusUnauthorized},
		"anonymous probes health":     {anonymous, "/healthz", http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &http.Client{Timeout: ioTimeout, Transport: &http.Transport{TLSClientConfig: tc.tls}}
			resp, err := c.Get("https://" + f.srv.Addr() + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestDiscovery(t *testing.T) {
	f := newFixture(t)
	resp, err := f.client().Get("https://" + f.srv.Addr() + basePath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var list metav1.APIResourceList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name+"="+strings.Join(r.Verbs, "|"))
	}
	want := "virtualmachineinstances/console=get,virtualmachineinstances/vnc=get,virtualmachineinstances/vnc/screenshot=get,virtualmachineinstances/guestosinfo=get,virtualmachineinstances/userlist=get,virtualmachines/restart=update,virtualmachines/start=update,virtualmachines/stop=update"
	if list.Kind != "APIResourceList" || list.GroupVersion != "subresources.kubevirt.io/v1" || strings.Join(names, ",") != want {
		t.Errorf("discovery %s %s %v, want an APIResourceList of subresources.kubevirt.io/v1 with %s", list.Kind, list.GroupVersion, names, want)
	}
}
