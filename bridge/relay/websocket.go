package relay

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// controlWriteTimeout bounds writing a ping or close frame.
const controlWriteTimeout = 5 * time.Second

// closeGrace is how long a closed socket waits for the peer's close reply
// before the TCP connection is dropped, so the close frame is read rather
// than lost to a reset.
const closeGrace = time.Second

// WSOptions are the limits of one WebSocket endpoint.
type WSOptions struct {
	// ReadLimit is the largest message accepted; a bigger one ends the
	// session (gorilla answers with close code 1009).
	ReadLimit int64
	// PingInterval is how often a ping is sent. A peer that answers neither
	// data nor pong within two intervals is gone.
	PingInterval time.Duration
	// WriteTimeout bounds one message write: a peer that accepts nothing for
	// this long is too slow and the session ends.
	WriteTimeout time.Duration
}

// BufferSize is the read and write buffer of every relayed WebSocket, for
// gorilla's Upgrader and Dialer: large enough that a 32 KiB message from
// virt-handler is read in one system call and written in one frame.
const BufferSize = 64 << 10

// initialMessageBuffer is where a WS's reusable message buffer starts; it
// grows to the largest message seen (at most the read limit).
const initialMessageBuffer = 32 << 10

// WS is a WebSocket Endpoint. One goroutine may read and one may write;
// Close may be called from any goroutine, more than once. ReadMessage
// reuses one buffer: the message it returns is valid until the next call,
// which is how Relay uses it (a message is written before the next read).
type WS struct {
	conn      *websocket.Conn
	opts      WSOptions
	done      chan struct{}
	closeOnce sync.Once
	buf       []byte
	// writeDeadline is the deadline last set; it is moved forward only once
	// it is nearer than half the write timeout, not on every message.
	writeDeadline time.Time
}

// NewWS applies opts to conn and starts its pinger.
func NewWS(conn *websocket.Conn, opts WSOptions) *WS {
	w := &WS{conn: conn, opts: opts, done: make(chan struct{})}
	conn.SetReadLimit(opts.ReadLimit)
	w.extendRead()
	conn.SetPongHandler(func(string) error { w.extendRead(); return nil })
	go w.ping()
	return w
}

func (w *WS) pongWait() time.Duration { return 2 * w.opts.PingInterval }

func (w *WS) extendRead() { _ = w.conn.SetReadDeadline(time.Now().Add(w.pongWait())) }

func (w *WS) ping() {
	t := time.NewTicker(w.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			if err := w.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(controlWriteTimeout)); err != nil {
				return
			}
		}
	}
}

// ReadMessage returns the next data message; any message from the peer
// proves it alive. Once Close has sent the close frame, the error that ends
// reading (normally the peer's close reply) drops the connection at once,
// so the peer sees the end without waiting for closeGrace.
func (w *WS) ReadMessage() (int, []byte, error) {
	kind, p, err := w.readMessage()
	if err != nil {
		select {
		case <-w.done:
			_ = w.conn.Close()
		default:
		}
		return 0, nil, err
	}
	w.extendRead()
	return kind, p, nil
}

// readMessage reads the next message into the reusable buffer.
func (w *WS) readMessage() (int, []byte, error) {
	kind, r, err := w.conn.NextReader()
	if err != nil {
		return 0, nil, err
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, min(initialMessageBuffer, max(w.opts.ReadLimit, 512)))
	}
	b := w.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow; the read limit bounds it
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			w.buf = b
			return kind, b, nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

// WriteMessage writes one message within the write timeout: a peer that
// accepts nothing for about that long fails the write.
func (w *WS) WriteMessage(kind int, p []byte) error {
	now := time.Now()
	if w.writeDeadline.Sub(now) < w.opts.WriteTimeout/2 {
		w.writeDeadline = now.Add(w.opts.WriteTimeout)
		if err := w.conn.SetWriteDeadline(w.writeDeadline); err != nil {
			return err
		}
	}
	return w.conn.WriteMessage(kind, p)
}

// Close sends a close frame with code and reason, then drops the connection
// once the peer replies or closeGrace passes.
func (w *WS) Close(code int, reason string) error {
	var err error
	w.closeOnce.Do(func() {
		close(w.done)
		msg := websocket.FormatCloseMessage(code, Truncate(reason))
		err = w.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(controlWriteTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			err = nil
		}
		// A reader waiting for the peer's reply gives up after closeGrace.
		_ = w.conn.SetReadDeadline(time.Now().Add(closeGrace))
		time.AfterFunc(closeGrace, func() { _ = w.conn.Close() })
	})
	return err
}

// CloseAndDrain closes with code and reason when nothing else reads the
// connection: it reads until the peer's close reply (or closeGrace), then
// drops the connection.
func (w *WS) CloseAndDrain(code int, reason string) error {
	err := w.Close(code, reason)
	for {
		if _, _, rerr := w.ReadMessage(); rerr != nil {
			return err
		}
	}
}

// Subprotocol is what the handshake agreed on.
func (w *WS) Subprotocol() string { return w.conn.Subprotocol() }
