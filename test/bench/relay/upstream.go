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
// as internal/virthandler and bridge/vnc's rig use.
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
//
// Its buffers are chosen so that it does no more work than the production
// hop it stands for (the API server's io.Copy and virt-handler's pipe),
// and no avoidable work in the benchmark's process, which the source and
// the client share: each direction reuses one buffer, and the WebSocket
// keeps gorilla's default 4 KiB buffers, so a 32 KiB message is written
// with one writev(2) of its header and the chunk, not copied first.
func NewUpstream(target string) *Upstream {
	var upgrader websocket.Upgrader
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
// It reuses one buffer (io.Copy to a TCP connection would take a fresh
// 32 KiB one for every message).
func pipeFromWebSocket(dst io.Writer, ws *websocket.Conn) error {
	buf := make([]byte, upstreamChunk)
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
	}
}
