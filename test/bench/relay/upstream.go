package relay

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// upstreamChunk is the largest message the upstream stand-in writes:
// KubeVirt's WebSocket buffer size (kubecli's WebsocketMessageBufferSize),
// as test/virthandler and bridge/vnc's rig use.
const upstreamChunk = 32 << 10

// dialTimeout bounds every dial and handshake of the benchmark.
const dialTimeout = 10 * time.Second

// Upstream is a stand-in for the API server's VNC subresource: a WebSocket
// server that pipes each connection to a TCP address (the source), in
// messages of at most 32 KiB, as virt-handler does. It runs in the
// benchmark's process; its CPU is not the proxy's.
type Upstream struct {
	srv *httptest.Server
}

// NewUpstream serves on a free loopback port and pipes to target.
func NewUpstream(target string) *Upstream {
	upgrader := websocket.Upgrader{ReadBufferSize: upstreamChunk, WriteBufferSize: upstreamChunk}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.Close() }()
		sock, err := net.DialTimeout("tcp", target, dialTimeout)
		if err != nil {
			return
		}
		defer func() { _ = sock.Close() }()
		// Either direction ending ends both.
		done := make(chan struct{}, 2)
		go func() { _ = pipeToWebSocket(ws, sock); done <- struct{}{} }()
		go func() { _ = pipeFromWebSocket(sock, ws); done <- struct{}{} }()
		<-done
	}))
	return &Upstream{srv: srv}
}

// URL is the stand-in's ws:// URL.
func (u *Upstream) URL() string { return "ws" + strings.TrimPrefix(u.srv.URL, "http") }

// Close stops the server and its connections.
func (u *Upstream) Close() {
	u.srv.CloseClientConnections()
	u.srv.Close()
}

// pipeToWebSocket sends what the source says as binary messages; the only
// writer.
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

// pipeFromWebSocket writes every message to the source; the only reader.
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
