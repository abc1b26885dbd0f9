package bridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/browser"
	"github.com/virtstation/virtstation/internal/nginx"
	"github.com/virtstation/virtstation/internal/proc"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// KubeVirt Manager 1.5.2 in front of the bridge, as the shipped recipe
// (config/samples/kubevirt-manager/virtstation.conf) sets it up: Debian's
// nginx with KubeVirt Manager's own server block (conf/default.conf of its
// image: the SPA root, "location /k8s" to kubectl proxy, and "include
// /etc/nginx/location.d/*.conf"), the recipe included there unchanged but for
// the bridge's address, and a bridge replica behind it serving TLS with a
// certificate for its Service's name from a CA nginx trusts. The clients do
// exactly what KubeVirt Manager's pages do.

// recipeFile is the shipped recipe, relative to the repository.
const recipeFile = "config/samples/kubevirt-manager/virtstation.conf"

// recipeUpstream is the recipe's proxy_pass, the one line the test changes.
const recipeUpstream = "proxy_pass https://virtstation-bridge.virtstation-system.svc:443;"

// bridgeServiceName is the name the recipe verifies the bridge's certificate
// against (its proxy_ssl_name), which the test's certificate is issued for.
const bridgeServiceName = "virtstation-bridge.virtstation-system.svc"

// kubectlProxyAnswer is what the stand-in for KubeVirt Manager's kubectl
// proxy answers, so a test can tell which location served a request.
const kubectlProxyAnswer = "kubectl proxy\n"

// kubevirtManager is one KubeVirt Manager nginx with a bridge behind it.
type kubevirtManager struct {
	// URL is KubeVirt Manager's origin, http://127.0.0.1:port.
	URL string
	// bridgeSaw and kubectlSaw are the requests nginx sent to the bridge and
	// to KubeVirt Manager's own /k8s upstream.
	bridgeSaw, kubectlSaw *requestLog
	nginx                 *nginx.Server
}

// requestLog records the requests a server received.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Clone(context.WithoutCancel(r.Context())))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *requestLog) last() *http.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) == 0 {
		return nil
	}
	return l.reqs[len(l.reqs)-1]
}

// kubevirtManagerSite is the http context of KubeVirt Manager 1.5.2's
// conf/default.conf, reduced to what decides where a request goes: its
// WebSocket map, the SPA root, "location /k8s" to kubectl proxy (which adds
// its ServiceAccount's token, so the browser's Authorization is dropped), and
// the include of location.d/*.conf in the server block.
func kubevirtManagerSite(listen, kubectlProxy string) string {
	return `map $http_upgrade $connection_upgrade {
    default upgrade;
    '' close;
}
server {
    listen ` + listen + `;
    server_name _;
    root html;
    index index.html;
    location / {
        try_files $uri $uri/ /index.html;
    }
    location /k8s {
        proxy_set_header Authorization "";
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $connection_upgrade;
        proxy_read_timeout 86400s;
        proxy_buffering off;
        proxy_http_version 1.1;
        proxy_pass http://` + kubectlProxy + `/k8s;
    }
    include location.d/*.conf;
}
`
}

// shippedRecipe reads the recipe and points its proxy_pass at addr; nothing
// else in it changes.
func shippedRecipe(t *testing.T, addr string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), recipeUpstream); n != 1 {
		t.Fatalf("%s has %d lines %q, want 1", recipeFile, n, recipeUpstream)
	}
	return []byte(strings.Replace(string(b), recipeUpstream, "proxy_pass https://"+addr+";", 1))
}

// testPKI is a CA and a serving certificate it issued for dnsName.
func testPKI(t *testing.T, dnsName string) (caPEM []byte, serving tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "virtstation-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startKubeVirtManager starts a bridge replica that allows KubeVirt
// Manager's origin, serving TLS as the chart does, and KubeVirt Manager's
// nginx with the shipped recipe in front of it; pages are files under its
// root (KubeVirt Manager's /usr/share/nginx/html). All of it stops when t
// ends.
func startKubeVirtManager(t *testing.T, pages map[string]string) *kubevirtManager {
	t.Helper()
	listen, err := nginx.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	k := &kubevirtManager{URL: "http://" + listen, bridgeSaw: &requestLog{}, kubectlSaw: &requestLog{}}

	// The replica's informers live as long as the test, not one testContext.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := bridge.NewFromConfig(ctx, bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: "replica-kubevirt-manager", LeaseDuration: leaseDuration,
		Options: bridge.Options{PingInterval: time.Second, AllowedOrigins: []string{k.URL}},
		Log:     logs.logger().WithName("replica-kubevirt-manager"),
	})
	if err != nil {
		t.Fatal(err)
	}
	caPEM, serving := testPKI(t, bridgeServiceName)
	br := httptest.NewUnstartedServer(k.bridgeSaw.wrap(srv))
	br.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12}
	br.StartTLS()
	t.Cleanup(br.Close)

	kubectl := httptest.NewServer(k.kubectlSaw.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, kubectlProxyAnswer)
	})))
	t.Cleanup(kubectl.Close)

	files := map[string][]byte{
		"location.d/virtstation.conf": shippedRecipe(t, br.Listener.Addr().String()),
		"virtstation/ca.crt":          caPEM,
		"html/index.html":             []byte("<!doctype html><title>KubeVirt Manager</title>\n"),
	}
	for name, body := range pages {
		files["html/"+name] = []byte(body)
	}
	k.nginx, err = nginx.Start(testContext(t), nginx.Options{
		Addr: listen, HTTP: kubevirtManagerSite(listen, kubectl.Listener.Addr().String()), Files: files,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nginx's error log:\n%s", k.nginx.Logs())
		}
		if err := k.nginx.Stop(); err != nil {
			t.Errorf("stop nginx: %v", err)
		}
	})
	return k
}

// kubevirtManagerPath is the path KubeVirt Manager's pages open for ws1:
// xterm.html's console and noVNC's vnc, under v1alpha3 as 1.5.2 has it.
func kubevirtManagerPath(version, vmi, sub string) string {
	return "/k8s/apis/subresources.kubevirt.io/" + version + "/namespaces/" + userNS + "/virtualmachineinstances/" + vmi + "/" + sub
}

// dial opens path as KubeVirt Manager's pages do in Chromium: no
// subprotocol, the page's Origin, the browser's other handshake headers and
// oauth2-proxy's session cookie; the user's token only in the
// X-Forwarded-Access-Token header oauth2-proxy adds in front of nginx.
func (k *kubevirtManager) dial(t *testing.T, path, token, origin string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{
		"Origin":        {origin},
		"User-Agent":    {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36"},
		"Pragma":        {"no-cache"},
		"Cache-Control": {"no-cache"},
		"Cookie":        {"_oauth2_proxy=session-cookie-of-oauth2-proxy"},
	}
	if token != "" {
		h.Set("X-Forwarded-Access-Token", token)
	}
	d := websocket.Dialer{HandshakeTimeout: ioTimeout}
	c, resp, err := d.Dial(wsURL(k.URL, path), h)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, resp, err
}

// mustDial dials as alice would and fails t on a refused handshake.
func (k *kubevirtManager) mustDial(t *testing.T, path, token string) *websocket.Conn {
	t.Helper()
	c, resp, err := k.dial(t, path, token, k.URL)
	if err != nil {
		t.Fatalf("dial %s through nginx: %v (%s)", path, err, body(resp))
	}
	if c.Subprotocol() != "" {
		t.Errorf("subprotocol = %q, want none: the page offered none", c.Subprotocol())
	}
	return c
}

// checkForwarded checks what the bridge received for the last handshake:
// KubeVirt's path without the /k8s prefix, the user's token as Authorization,
// the page's Origin, and neither oauth2-proxy's header nor its cookie.
func (k *kubevirtManager) checkForwarded(t *testing.T, path, token string) {
	t.Helper()
	r := k.bridgeSaw.last()
	if r == nil {
		t.Fatal("the bridge received nothing")
	}
	if want := strings.TrimPrefix(path, "/k8s"); r.URL.Path != want {
		t.Errorf("the bridge got path %q, want %q", r.URL.Path, want)
	}
	// The token itself is never printed.
	if r.Header.Get("Authorization") != "Bearer "+token {
		t.Errorf("the bridge's Authorization is not the user's own bearer token")
	}
	if got := r.Header.Get("Origin"); got != k.URL {
		t.Errorf("the bridge got Origin %q, want KubeVirt Manager's %q", got, k.URL)
	}
	if r.Host == strings.TrimPrefix(k.URL, "http://") {
		t.Errorf("the bridge got KubeVirt Manager's Host %q, want its own name", r.Host)
	}
	for _, h := range []string{"X-Forwarded-Access-Token", "Cookie"} {
		if r.Header.Get(h) != "" {
			t.Errorf("nginx passed %s on to the bridge", h)
		}
	}
	if r.Header.Get("Sec-WebSocket-Protocol") != "" {
		t.Errorf("the bridge got subprotocols %q, want none", r.Header.Get("Sec-WebSocket-Protocol"))
	}
}

// refusedWith dials path and wants the handshake accepted and then closed
// with code and a reason containing each of want, as a browser page can read.
func (k *kubevirtManager) refusedWith(t *testing.T, path, token, origin string, code int, want ...string) {
	t.Helper()
	c, resp, err := k.dial(t, path, token, origin)
	if err != nil {
		t.Fatalf("dial %s: %v (%s); want the upgrade accepted and a close frame %d, which a page can show", path, err, body(resp), code)
	}
	if c.Subprotocol() != "" {
		t.Errorf("subprotocol = %q, want none", c.Subprotocol())
	}
	ce := closeFrame(t, c)
	if ce.Code != code {
		t.Fatalf("close frame %d %q, want %d", ce.Code, ce.Text, code)
	}
	for _, w := range want {
		if !strings.Contains(ce.Text, w) {
			t.Fatalf("close reason %q does not contain %q", ce.Text, w)
		}
	}
}

func TestKubeVirtManagerThroughTheShippedNginxRecipe(t *testing.T) {
	k := startKubeVirtManager(t, nil)

	for _, version := range []string{"v1alpha3", "v1"} {
		t.Run("console "+version, func(t *testing.T) {
			t.Cleanup(func() { waitReleased(t, virthandler.Console) })
			path := kubevirtManagerPath(version, "ws1", "console")
			c := k.mustDial(t, path, tokens["alice"])
			k.checkForwarded(t, path, tokens["alice"])
			// xterm.html sends what is typed as binary messages; the guest
			// echoes in upper case.
			send(t, c, websocket.BinaryMessage, "hello")
			readUntil(t, c, "HELLO")
			_ = c.Close()
		})
		t.Run("vnc "+version, func(t *testing.T) {
			t.Cleanup(func() { waitReleased(t, virthandler.VNC) })
			path := kubevirtManagerPath(version, "ws1", "vnc")
			c := k.mustDial(t, path, tokens["alice"])
			k.checkForwarded(t, path, tokens["alice"])
			readUntil(t, c, "RFB 003.008\n") // QEMU's greeting
			// noVNC sends no preserveSession: the bridge guards the session.
			if last := handler.Calls()[len(handler.Calls())-1]; !last.PreserveSession {
				t.Errorf("VNC was dialled without preserveSession: %+v", last)
			}
			_ = c.Close()
		})
	}

	t.Run("held session", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) })
		alice := k.mustDial(t, kubevirtManagerPath("v1alpha3", "ws1", "console"), tokens["alice"])
		send(t, alice, websocket.BinaryMessage, "mine")
		readUntil(t, alice, "MINE")
		// bob's page is told who holds it.
		k.refusedWith(t, kubevirtManagerPath("v1alpha3", "ws1", "console"), tokens["bob"], k.URL,
			4409, "SessionHeld", user("alice"))
		// alice's session is untouched.
		send(t, alice, websocket.BinaryMessage, "still")
		readUntil(t, alice, "STILL")
		_ = alice.Close()
	})

	refusals := map[string]struct {
		sub, token, origin string
		code               int
		want               []string
	}{
		"no role":      {sub: "vnc", token: "eve", code: 4403, want: []string{"Forbidden", user("eve")}},
		"no token":     {sub: "console", code: 4401, want: []string{"Unauthorized"}},
		"other origin": {sub: "console", token: "alice", origin: "https://evil.example", code: 4403, want: []string{"OriginNotAllowed", "https://evil.example"}},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			origin := tc.origin
			if origin == "" {
				origin = k.URL
			}
			k.refusedWith(t, kubevirtManagerPath("v1alpha3", "ws1", tc.sub), tokens[tc.token], origin, tc.code, tc.want...)
		})
	}

	t.Run("everything else stays on KubeVirt Manager's /k8s", func(t *testing.T) {
		paths := []struct{ method, path string }{
			{http.MethodGet, "/k8s/api/v1/secrets"},
			{http.MethodGet, "/k8s/apis/kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/ws1"},
			{http.MethodPut, "/k8s/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachines/ws1/restart"},
			{http.MethodGet, "/k8s/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/ws1/vnc/screenshot"},
			{http.MethodGet, "/k8s/apis/subresources.kubevirt.io/v1alpha3/namespaces/team-a/virtualmachineinstances/ws1/consoles"},
			{http.MethodGet, "/k8s/apis/subresources.kubevirt.io/v2/namespaces/team-a/virtualmachineinstances/ws1/console"},
			{http.MethodGet, "/k8s/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachines/ws1/console"},
		}
		for _, p := range paths {
			before, kubectlBefore := k.bridgeSaw.len(), k.kubectlSaw.len()
			req, err := http.NewRequest(p.method, k.URL+p.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Forwarded-Access-Token", tokens["alice"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if n := k.bridgeSaw.len() - before; n != 0 {
				t.Errorf("%s %s reached the bridge", p.method, p.path)
			}
			if string(b) != kubectlProxyAnswer || k.kubectlSaw.len() != kubectlBefore+1 {
				t.Errorf("%s %s: %s %q, want it served by KubeVirt Manager's /k8s location", p.method, p.path, resp.Status, b)
				continue
			}
			if got := k.kubectlSaw.last().URL.Path; got != p.path {
				t.Errorf("kubectl proxy got %q, want %q", got, p.path)
			}
		}
	})
}

func TestKubeVirtManagerRecipeVerifiesTheBridgesCertificate(t *testing.T) {
	// A bridge whose certificate nginx's CA did not sign gets no request,
	// and so no token: the recipe's proxy_ssl_verify is on.
	_, serving := testPKI(t, bridgeServiceName)
	otherCA, _ := testPKI(t, bridgeServiceName)
	saw := &requestLog{}
	br := httptest.NewUnstartedServer(saw.wrap(http.NotFoundHandler()))
	br.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	br.StartTLS()
	defer br.Close()
	listen, err := nginx.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	ng, err := nginx.Start(testContext(t), nginx.Options{
		Addr: listen, HTTP: kubevirtManagerSite(listen, "127.0.0.1:9"),
		Files: map[string][]byte{
			"location.d/virtstation.conf": shippedRecipe(t, br.Listener.Addr().String()),
			"virtstation/ca.crt":          otherCA,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ng.Stop() }()
	k := &kubevirtManager{URL: "http://" + listen}
	_, resp, err := k.dial(t, kubevirtManagerPath("v1", "ws1", "console"), tokens["alice"], k.URL)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dial: %v %s, want 502 from nginx", err, body(resp))
	}
	if saw.len() != 0 {
		t.Fatal("the unverified bridge received the request")
	}
	if !ng.WaitLog("upstream SSL certificate verify error", ioTimeout) {
		t.Errorf("nginx's log does not say why:\n%s", ng.Logs())
	}
}

// sessionPage opens ws1's console as KubeVirt Manager's xterm.html does (a
// path-only URL, no subprotocol) and shows how the socket ended, which is all
// a page can know of a refusal: the close code and its reason.
const sessionPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>console</title></head>
<body>
<pre id="result">connecting</pre>
<script>
  const params = new URLSearchParams(window.location.search);
  const wsURL = "/k8s/apis/subresources.kubevirt.io/v1alpha3/namespaces/" + params.get("namespace") +
    "/virtualmachineinstances/" + params.get("vm") + "/console";
  const out = document.getElementById("result");
  const socket = new WebSocket(wsURL);
  socket.binaryType = "arraybuffer";
  socket.onopen = () => { out.textContent = "connected"; };
  socket.onclose = (e) => { out.textContent = "closed " + e.code + ": " + e.reason; };
</script>
</body>
</html>
`

// openWithHeaders opens url in a new tab whose every request carries
// headers; unlike browser.Open, it expects a page from KubeVirt Manager's
// nginx, which sends no Content-Security-Policy.
func openWithHeaders(t *testing.T, b *browser.Browser, name, url string, headers map[string]string) *browser.Tab {
	t.Helper()
	p := b.NewTab(t, name, headers)
	var resp struct {
		Status int `json:"status"`
	}
	p.Decode(p.Do("goto", map[string]any{"url": url}), &resp)
	if resp.Status != http.StatusOK {
		t.Fatalf("%s: GET %s: %d", name, url, resp.Status)
	}
	return p
}

// TestBrowserKubeVirtManagerRefusal: a page of KubeVirt Manager's shows why
// a session is refused. (Chromium's profile lives under the test's name, and
// its socket path must stay short.)
func TestBrowserKubeVirtManagerRefusal(t *testing.T) {
	k := startKubeVirtManager(t, map[string]string{"assets/session.html": sessionPage})
	t.Cleanup(func() { waitReleased(t, virthandler.Console) })
	alice := k.mustDial(t, kubevirtManagerPath("v1alpha3", "ws1", "console"), tokens["alice"])
	// alice's client keeps reading, so it answers the bridge's pings while
	// the browser works.
	echo := &proc.Output{}
	go func() {
		for {
			_, p, err := alice.ReadMessage()
			if err != nil {
				return
			}
			_, _ = echo.Write(p)
		}
	}()
	waitEcho := func(typed string) {
		t.Helper()
		send(t, alice, websocket.BinaryMessage, typed)
		deadline := time.Now().Add(ioTimeout)
		for !strings.Contains(echo.String(), strings.ToUpper(typed)) {
			if time.Now().After(deadline) {
				t.Fatalf("alice's console never echoed %q; it shows %q", typed, echo.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitEcho("held")

	b := browser.Start(t)
	query := "/assets/session.html?namespace=" + userNS + "&vm=ws1"
	t.Run("held", func(t *testing.T) {
		// bob's page, from KubeVirt Manager's allowed origin, with his token
		// added by oauth2-proxy in front of nginx.
		bob := openWithHeaders(t, b, "kvm-bob", k.URL+query, map[string]string{"X-Forwarded-Access-Token": tokens["bob"]})
		bob.WaitText("#result", "closed 4409: SessionHeld")
		bob.WaitText("#result", user("alice"))
		bob.Screenshot("held")
		if r := bob.Report(); len(r.Sockets) != 1 || !strings.Contains(r.Sockets[0], kubevirtManagerPath("v1alpha3", "ws1", "console")) {
			t.Errorf("the page opened %q, want one socket to the console", r.Sockets)
		}
	})
	t.Run("origin not allowed", func(t *testing.T) {
		// The same page from another origin of the same nginx: the bridge
		// allows only KubeVirt Manager's listed one.
		other := strings.Replace(k.URL, "127.0.0.1", "localhost", 1)
		pg := openWithHeaders(t, b, "kvm-other-origin", other+query, map[string]string{"X-Forwarded-Access-Token": tokens["bob"]})
		pg.WaitText("#result", "closed 4403: OriginNotAllowed")
		pg.WaitText("#result", other)
		pg.Screenshot("origin")
	})
	// alice kept her console throughout.
	waitEcho("still")
	_ = alice.Close()
}

func TestKubeVirtManagerRecipeOutlastsTheBridgesPings(t *testing.T) {
	// nginx closes an upgraded connection whose upstream is silent for
	// proxy_read_timeout (proxy_send_timeout for a stalled write). The
	// bridge's pings are what it reads from an idle session, so both must
	// leave room for several missed pings, or idle users are cut off.
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, directive := range []string{"proxy_read_timeout", "proxy_send_timeout"} {
		m := regexp.MustCompile(`(?m)^\s*` + directive + `\s+(\S+);`).FindSubmatch(b)
		if m == nil {
			t.Errorf("%s sets no %s; nginx's default is 60s, two pings", recipeFile, directive)
			continue
		}
		d, err := time.ParseDuration(string(m[1]))
		if err != nil {
			t.Fatalf("%s %s: %v", directive, m[1], err)
		}
		if d < 5*bridge.DefaultPingInterval {
			t.Errorf("%s %v leaves room for fewer than 5 of the bridge's pings (every %v)", directive, d, bridge.DefaultPingInterval)
		}
	}
}
