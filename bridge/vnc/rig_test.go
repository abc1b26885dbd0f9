package vnc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// The benchmark's rig: QEMU's VNC unix socket behind a stand-in for
// virt-handler's VNC WebSocket (upstream), the bridge's VNC path as
// bridge/ws.go assembles it (relay.Relay with a vnc.Proxy between two
// relay.WS endpoints), and a client link over loopback TCP narrowed to a
// fixed rate.

// Limits of the rig's endpoints, those of the bridge and of KubeVirt.
const (
	// upstreamChunk is the largest message the upstream stand-in writes:
	// KubeVirt's WebSocket buffer size (kubecli's
	// WebsocketMessageBufferSize), as internal/virthandler uses.
	upstreamChunk = 32 << 10
	// clientReadLimit and upstreamReadLimit are the bridge's own
	// (bridge/options.go: vncReadLimit and upstreamReadLimit).
	clientReadLimit   = 1<<20 + 64<<10
	upstreamReadLimit = 4 << 20
	// pingInterval and writeTimeout are the bridge's defaults; neither
	// fires in a run of a few seconds unless something is stuck.
	pingInterval = 30 * time.Second
	writeTimeout = 30 * time.Second
	// rigTimeout bounds dials and the end of a session.
	rigTimeout = 10 * time.Second
)

// Socket buffers of the narrow link. Linux doubles what is asked and stops
// auto-tuning a buffer that was set, so together they hold about 64 KiB in
// flight between the bridge's writes and the client's reads: 64 ms at
// 1 MB/s, about what a 50 ms WAN round trip holds. Without them loopback
// would buffer megabytes and hide the client's pace from the bridge.
const (
	bridgeSendBuffer = 16 << 10
	clientRecvBuffer = 16 << 10
)

// The client reads through a token bucket this small, so the link behaves
// like a bottleneck of fixed rate: time it spends idle is lost, not saved
// up for the next update. Reads wait for at least minThrottledChunk.
const (
	throttleBurst     = 4 << 10
	minThrottledChunk = 1 << 10
)

// startUpstream serves a WebSocket that pipes to QEMU's VNC socket, as
// virt-handler's VNC subresource does, and returns its ws:// URL.
func startUpstream(tb testing.TB, socket string) string {
	tb.Helper()
	upgrader := websocket.Upgrader{ReadBufferSize: upstreamChunk, WriteBufferSize: upstreamChunk}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.Close() }()
		sock, err := net.DialTimeout("unix", socket, rigTimeout)
		if err != nil {
			return
		}
		defer func() { _ = sock.Close() }()
		// Either direction ending ends both; why makes no difference to
		// the bridge, which sees the connection close.
		done := make(chan struct{}, 2)
		go func() { _ = pipeToWebSocket(ws, sock); done <- struct{}{} }()
		go func() { _ = pipeFromWebSocket(sock, ws); done <- struct{}{} }()
		<-done
	}))
	tb.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// pipeToWebSocket sends what QEMU says as binary messages; the only writer.
func pipeToWebSocket(ws *websocket.Conn, src io.Reader) error {
	buf := make([]byte, upstreamChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// pipeFromWebSocket writes every message to QEMU; the only reader.
func pipeFromWebSocket(dst io.Writer, ws *websocket.Conn) error {
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, r); err != nil {
			return err
		}
	}
}

// bridgeSession is what the stand-in bridge reports of its one session.
type bridgeSession struct {
	probe *probe
	end   relay.Ending
}

// startBridge serves the bridge's VNC path for one client at a time with
// the adaptive controller on or off, over a listener whose connections
// have a small send buffer. Each session's proxy reports to obs, which
// also gets the client's reply times (see probe), and its bytes to the
// client to meter; ended receives each session when it ends.
func startBridge(tb testing.TB, upstreamURL string, adaptive bool, obs *observer, meter relay.Meter) (url string, ended <-chan bridgeSession) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	sessions := make(chan bridgeSession, 1)
	// The bridge's buffer settings (bridge/server.go, bridge/upstream).
	upgrader := websocket.Upgrader{WriteBufferSize: relay.WriteBufferSize, WriteBufferPool: relay.WriteBufferPool()}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dialer := websocket.Dialer{HandshakeTimeout: rigTimeout, NetDialContext: relay.DialReadAhead,
			ReadBufferSize: relay.ReadBufferSize, WriteBufferSize: relay.WriteBufferSize, WriteBufferPool: relay.WriteBufferPool()}
		upConn, _, err := dialer.DialContext(r.Context(), upstreamURL, nil) //nolint:contextcheck // the upstream dial belongs to this request; ctx is the bridge's lifetime
		if err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
		up := relay.NewWS(upConn, relay.WSOptions{ReadLimit: upstreamReadLimit, PingInterval: pingInterval, WriteTimeout: writeTimeout, Coalesce: true})
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			_ = up.Close(websocket.CloseNormalClosure, "client handshake failed")
			return
		}
		client := relay.NewWS(conn, relay.WSOptions{ReadLimit: clientReadLimit, PingInterval: pingInterval, WriteTimeout: writeTimeout})
		pr := &probe{Proxy: vnc.NewProxy(vnc.Options{Adaptive: adaptive, Observer: obs}), obs: obs}
		end := relay.Relay(ctx, client, up, relay.Options{
			IdleTimeout:  time.Hour,
			Interceptor:  pr,
			Meter:        meter,
			UpstreamName: "VNC display",
		})
		sessions <- bridgeSession{probe: pr, end: end}
	}))
	srv.Listener = narrowListener{srv.Listener}
	srv.Start()
	tb.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), sessions
}

// probe is the session's vnc.Proxy as the relay sees it, recording what
// the proxy does not report:
//
//   - the client's reply time: how long after the bridge's last write to
//     the client the client's next incremental update request arrives. A
//     client that asks for the next update once it has the last (noVNC
//     without continuous updates) asks once the bytes buffered between the
//     bridge and it have drained, so this is the link's lag, which the
//     write times the proxy measures leave out;
//   - how many update requests the client sent, how many of them the proxy
//     held back, and how many requests and other messages (SetEncodings
//     rewrites) the proxy sent upstream on its own.
//
// Relay calls Client on its client pump, Delivered on its upstream pump
// and the proxy's send from the proxy's goroutine; mu guards the rest.
type probe struct {
	*vnc.Proxy
	obs *observer

	mu        sync.Mutex
	lastWrite time.Time
	counts    requestCounts
}

// requestCounts are a session's update requests and the proxy's own
// messages upstream.
type requestCounts struct {
	fromClient, held, fromProxy, rewrites int
}

func (r *probe) Start(send func([]byte) error) {
	r.Proxy.Start(func(p []byte) error {
		r.mu.Lock()
		if isUpdateRequest(p) {
			r.counts.fromProxy++
		} else {
			r.counts.rewrites++
		}
		r.mu.Unlock()
		return send(p)
	})
}

func (r *probe) Client(kind int, p []byte) ([]byte, bool, error) {
	fwd, input, err := r.Proxy.Client(kind, p)
	if !isUpdateRequest(p) {
		return fwd, input, err
	}
	r.mu.Lock()
	r.counts.fromClient++
	if fwd == nil {
		r.counts.held++
	}
	r.mu.Unlock()
	return fwd, input, err
}

func (r *probe) Delivered(p []byte) {
	r.Proxy.Delivered(p)
	r.mu.Lock()
	r.lastWrite = time.Now()
	r.mu.Unlock()
}

func (r *probe) requests() requestCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// isUpdateRequest says whether a message is one FramebufferUpdateRequest,
// as the test client and the proxy write them: one message each.
func isUpdateRequest(p []byte) bool { return len(p) == 10 && p[0] == 3 }

var _ relay.Interceptor = (*probe)(nil)

// narrowListener gives every accepted connection a small send buffer, so
// the bridge feels the client's reading pace as it would over a WAN.
type narrowListener struct{ net.Listener }

func (l narrowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(bridgeSendBuffer)
	}
	return c, err
}

// dialThrottled connects over TCP with a small receive buffer and reads
// at most rate bytes a second (WebSocket framing included), a token bucket
// of throttleBurst bytes.
func dialThrottled(rate float64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			_ = c.Close()
			return nil, errors.New("not a TCP connection")
		}
		if err := tc.SetReadBuffer(clientRecvBuffer); err != nil {
			_ = c.Close()
			return nil, err
		}
		return &throttledConn{Conn: c, rate: rate, tokens: throttleBurst, last: time.Now()}, nil
	}
}

// throttledConn reads through a token bucket. One goroutine may read.
type throttledConn struct {
	net.Conn
	rate   float64 // bytes a second
	tokens float64
	last   time.Time

	mu   sync.Mutex
	read int64 // bytes read so far
}

func (c *throttledConn) refill() {
	now := time.Now()
	c.tokens = min(throttleBurst, c.tokens+now.Sub(c.last).Seconds()*c.rate)
	c.last = now
}

// Read waits until the bucket holds a chunk's worth, then reads no more
// than the bucket holds.
func (c *throttledConn) Read(p []byte) (int, error) {
	c.refill()
	if c.tokens < minThrottledChunk {
		time.Sleep(time.Duration((minThrottledChunk - c.tokens) / c.rate * float64(time.Second)))
		c.refill()
	}
	n, err := c.Conn.Read(p[:min(len(p), int(c.tokens))])
	c.tokens -= float64(n)
	c.mu.Lock()
	c.read += int64(n)
	c.mu.Unlock()
	return n, err
}

// bytesRead is how many bytes the client has read off the link.
func (c *throttledConn) bytesRead() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}
