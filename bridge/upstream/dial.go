package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/virtstation/virtstation/bridge/relay"
)

// Subprotocol is the one KubeVirt's subresources speak: raw bytes in binary
// messages.
const Subprotocol = "plain.kubevirt.io"

// handshakeTimeout bounds the TLS and WebSocket handshake with the API
// server; the API server answers in milliseconds, virt-handler behind it in
// well under a second.
const handshakeTimeout = 15 * time.Second

// maxErrorBody bounds how much of a failed handshake's body is read for the
// error message.
const maxErrorBody = 4 << 10

// Subresource is a VMI subresource the bridge relays.
type Subresource string

const (
	// Console is the VMI's serial console (virtctl console).
	Console Subresource = "console"
	// VNC is the VMI's graphical display, spoken as RFB (virtctl vnc).
	VNC Subresource = "vnc"
)

var (
	// ErrBusy means KubeVirt refused because another client holds the
	// subresource (HTTP 503 from virt-handler, e.g. VNC with preserveSession).
	ErrBusy = errors.New("another client outside this bridge is connected to this VM")
	// ErrNotFound means the API server or KubeVirt does not know the VMI.
	ErrNotFound = errors.New("the VMI does not exist")
	// ErrForbidden means the bridge's ServiceAccount lacks the permission.
	ErrForbidden = errors.New("the bridge's ServiceAccount is not allowed to open this subresource")
	// ErrTooLarge means KubeVirt answered more than the caller's limit.
	ErrTooLarge = errors.New("the answer is larger than the bridge relays")
)

// Dialer opens subresource connections through one API server. It is safe
// for concurrent use. Authentication is client-go's, so every form a
// kubeconfig or an in-cluster config takes works: bearer tokens and
// rotating token files, client certificates, exec credential plugins,
// impersonation and proxies.
type Dialer struct {
	host *url.URL
	// transport is cfg as client-go's transport layer reads it, exec plugin
	// included; each WebSocket dial wraps its own upgrader with it.
	transport *transport.Config
	tlsConfig *tls.Config
	proxy     func(*http.Request) (*url.URL, error)
	// http is client-go's client for cfg, for the plain requests.
	http *http.Client
}

// NewDialer builds a Dialer from cfg.
func NewDialer(cfg *rest.Config) (*Dialer, error) {
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("API server credentials: %w", err)
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, fmt.Errorf("API server TLS settings: %w", err)
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	}
	plain := rest.CopyConfig(cfg)
	if plain.Timeout == 0 {
		plain.Timeout = handshakeTimeout
	}
	httpClient, err := rest.HTTPClientFor(plain)
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	// client-go's round trippers add the credentials to every hop, so a
	// redirect would carry the ServiceAccount's token wherever the answer
	// points. KubeVirt's subresources never redirect: the answer is the
	// error.
	httpClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Dialer{host: host, transport: tc, tlsConfig: tlsConfig, proxy: proxy, http: httpClient}, nil
}

func (d *Dialer) url(scheme, path string, query url.Values) string {
	u := *d.host
	u.Scheme = scheme
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	return u.String()
}

// upgrader is the innermost round tripper of one WebSocket dial: client-go's
// wrappers add the credentials to the request, and it dials with the
// relay's buffers. It keeps the connection, or the failed handshake's
// response, for Dial. It is used once.
type upgrader struct {
	dialer websocket.Dialer
	conn   *websocket.Conn
}

func (u *upgrader) RoundTrip(req *http.Request) (*http.Response, error) {
	conn, resp, err := u.dialer.DialContext(req.Context(), req.URL.String(), req.Header)
	if err != nil {
		if resp != nil && errors.Is(err, websocket.ErrBadHandshake) {
			// The API server's answer, for classify: the wrappers pass it on.
			return resp, nil
		}
		return nil, err
	}
	u.conn = conn
	return resp, nil
}

// DialOptions change how a subresource is opened.
type DialOptions struct {
	// TakeDisplay opens VNC with KubeVirt's preserveSession=false, which
	// disconnects whoever holds the display, inside or outside the bridge.
	// Only a user who asked KubeVirt's way for it (virtctl vnc) gets it.
	TakeDisplay bool
}

// Dial opens the VMI's subresource. VNC is opened with preserveSession=true
// unless opts.TakeDisplay, so that KubeVirt refuses (ErrBusy) rather than
// silently disconnecting a client that reached the display without the
// bridge.
func (d *Dialer) Dial(ctx context.Context, namespace, name string, sub Subresource, opts DialOptions) (*websocket.Conn, error) {
	q := url.Values{}
	if sub == VNC {
		q.Set("preserveSession", strconv.FormatBool(!opts.TakeDisplay))
	}
	scheme := "wss"
	if d.host.Scheme == "http" {
		scheme = "ws"
	}
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/%s",
		url.PathEscape(namespace), url.PathEscape(name), sub)
	u := &upgrader{dialer: websocket.Dialer{
		TLSClientConfig:  d.tlsConfig,
		HandshakeTimeout: handshakeTimeout,
		Subprotocols:     []string{Subprotocol},
		Proxy:            d.proxy,
		// Read ahead from the socket, so the relay can gather the messages
		// that have arrived into one write to the client.
		NetDialContext:  relay.DialReadAhead,
		ReadBufferSize:  relay.ReadBufferSize,
		WriteBufferSize: relay.WriteBufferSize,
		WriteBufferPool: relay.WriteBufferPool(),
	}}
	rt, err := transport.HTTPWrappersForConfig(d.transport, u)
	if err != nil {
		return nil, fmt.Errorf("API server credentials: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url(scheme, path, q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, classify(nil, err)
	}
	if u.conn == nil {
		return nil, classify(resp, websocket.ErrBadHandshake)
	}
	return u.conn, nil
}

// Restart calls the VM's restart subresource, as `virtctl restart` does.
func (d *Dialer) Restart(ctx context.Context, namespace, name string) error {
	return d.put(ctx, namespace, name, "restart")
}

// ErrConflict means KubeVirt refused a start or stop as out of place: the
// VM is already running, or its run strategy does not take the request.
var ErrConflict = errors.New("KubeVirt refused the request in the VM's state")

// Start calls the VM's start subresource, as `virtctl start` does. A VM
// that is already running, or whose run strategy starts it by itself
// (Always), is ErrConflict.
func (d *Dialer) Start(ctx context.Context, namespace, name string) error {
	return d.put(ctx, namespace, name, "start")
}

// put calls a VM subresource of KubeVirt's with an empty options body.
func (d *Dialer) put(ctx context.Context, namespace, name, sub string) error {
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachines/%s/%s",
		url.PathEscape(namespace), url.PathEscape(name), sub)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.url(d.host.Scheme, path, nil), strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", sub, namespace, name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	return classify(resp, errors.New(sub+" failed"))
}

// Get reads what a KubeVirt subresource answers to a plain GET, as the
// bridge: the VNC screenshot, KubeVirt's version. path is below the API
// server's root. The body is streamed; reading past limit bytes fails with
// ErrTooLarge rather than cutting the answer silently.
func (d *Dialer) Get(ctx context.Context, path string, query url.Values, limit int64) (body io.ReadCloser, contentType string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url(d.host.Scheme, path, query), nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, "", classify(resp, fmt.Errorf("GET %s failed", path))
	}
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, "", fmt.Errorf("GET %s: %d bytes: %w", path, resp.ContentLength, ErrTooLarge)
	}
	return &limitedBody{r: resp.Body, left: limit}, resp.Header.Get("Content-Type"), nil
}

// limitedBody fails a read past its limit.
type limitedBody struct {
	r    io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body that ends here from one that goes on.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, ErrTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// classify turns a failed handshake into one of the package's errors, with
// the server's message kept for the log.
func classify(resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("reach the API server: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	detail := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		return fmt.Errorf("%w (KubeVirt answered 503: %s)", ErrBusy, detail)
	case http.StatusNotFound:
		return fmt.Errorf("%w (404: %s)", ErrNotFound, detail)
	case http.StatusForbidden, http.StatusUnauthorized:
		return fmt.Errorf("%w (%d: %s)", ErrForbidden, resp.StatusCode, detail)
	case http.StatusConflict:
		return fmt.Errorf("%w (409: %s)", ErrConflict, detail)
	}
	return fmt.Errorf("KubeVirt answered %s: %s", resp.Status, detail)
}
