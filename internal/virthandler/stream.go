package virthandler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Subprotocol is the WebSocket subprotocol KubeVirt's console and VNC
// subresources speak: raw bytes in binary messages.
const Subprotocol = "plain.kubevirt.io"

// bufferSize is KubeVirt's WebSocket buffer size (kubecli's
// WebsocketMessageBufferSize), and the largest message this side writes.
const bufferSize = 32 << 10

// maxMessageSize bounds a message from the API server; VNC and console input
// messages are tiny, so anything near this is a bug.
const maxMessageSize = 1 << 20

// dialTimeout bounds connecting to QEMU's socket, which answers at once
// unless another console client holds it.
const dialTimeout = 10 * time.Second

// writeTimeout bounds one WebSocket write; the API server reads promptly
// unless the client is gone.
const writeTimeout = 30 * time.Second

// handshakeTimeout bounds the WebSocket upgrade.
const handshakeTimeout = 10 * time.Second

var upgrader = websocket.Upgrader{
	HandshakeTimeout: handshakeTimeout,
	ReadBufferSize:   bufferSize,
	WriteBufferSize:  bufferSize,
	Subprotocols:     []string{Subprotocol},
	// Only the API server's front proxy calls this server; Origin is the
	// browser's, checked (or not) by whoever serves the browser.
	CheckOrigin: func(*http.Request) bool { return true },
}

// stream serves the console or VNC subresource of a VMI.
func (s *Server) stream(kind Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.enter() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		defer s.inflight.Done()
		call := newCall(kind, r)
		if kind == VNC {
			call.PreserveSession, _ = strconv.ParseBool(r.URL.Query().Get("preserveSession"))
		}
		target, ok := s.target(call.Namespace, call.Name)
		if !ok {
			s.fail(w, call, apierrors.NewNotFound(vmiResource, call.Name))
			return
		}
		socket := target.socket(kind)
		if socket == "" {
			s.fail(w, call, apierrors.NewBadRequest(fmt.Sprintf("virtualmachineinstance %s/%s has no %s device", call.Namespace, call.Name, kind)))
			return
		}

		key := connKey{namespace: call.Namespace, name: call.Name, kind: kind}
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		c := &conn{stop: cancel}
		displaced, ok := s.sessions.admit(key, c, call.PreserveSession)
		if !ok {
			s.fail(w, call, apierrors.NewServiceUnavailable("Active VNC connection. Request denied."))
			return
		}
		defer s.sessions.done(key, c)
		if displaced != nil {
			displaced.stop()
		}

		call.Status = http.StatusSwitchingProtocols
		i := s.calls.add(call)
		ws, err := upgrader.Upgrade(w, r, nil) // answers the failure itself
		if err != nil {
			s.calls.setStatus(i, http.StatusBadRequest)
			return
		}
		var tap Tap
		if kind == VNC && target.VNCTap != nil {
			tap = target.VNCTap()
		}
		pipe(ctx, ws, socket, tap) //nolint:contextcheck // the stream is the Server's: it ends when the Server closes or a newer session displaces it, not with the request
	}
}

// pipe copies between the WebSocket and the unix socket until either side
// ends or ctx is done, then closes both without a close frame, as
// virt-handler does. tap, when not nil, sees both directions.
func pipe(ctx context.Context, ws *websocket.Conn, socket string, tap Tap) {
	defer func() { _ = ws.Close() }()
	ws.SetReadLimit(maxMessageSize)
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	sock, err := d.DialContext(dctx, "unix", socket)
	if err != nil {
		return
	}
	defer func() { _ = sock.Close() }()

	// Either direction ending ends both; which one, and why, makes no
	// difference to the peers, who see the connection close.
	done := make(chan struct{}, 2)
	go func() { _ = copyToWebSocket(ws, sock, tap); done <- struct{}{} }()
	go func() { _ = copyFromWebSocket(sock, ws, tap); done <- struct{}{} }()
	pending := 2
	select {
	case <-ctx.Done():
	case <-done:
		pending--
	}
	_ = ws.Close()
	_ = sock.Close()
	for ; pending > 0; pending-- {
		<-done
	}
}

// copyToWebSocket sends what the socket says as binary messages. It is the
// only writer of ws.
func copyToWebSocket(ws *websocket.Conn, src io.Reader, tap Tap) error {
	buf := make([]byte, bufferSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if tap != nil {
				tap.FromVM(buf[:n])
			}
			if werr := ws.SetWriteDeadline(time.Now().Add(writeTimeout)); werr != nil {
				return werr
			}
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// copyFromWebSocket writes every message's payload, binary or text, to dst.
// It is the only reader of ws.
func copyFromWebSocket(dst io.Writer, ws *websocket.Conn, tap Tap) error {
	for {
		_, r, err := ws.NextReader()
		if err != nil {
			return err
		}
		if tap != nil { // whole messages: the read limit bounds them
			p, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			tap.FromClient(p)
			r = bytes.NewReader(p)
		}
		if _, err := io.Copy(dst, r); err != nil {
			return err
		}
	}
}
