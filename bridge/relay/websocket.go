package relay

import (
	"errors"
	"io"
	"net"
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
	// data nor pong within 1.5 to 2 intervals is gone (data moves the read
	// deadline only once half an interval of it is spent; a pong always
	// does).
	PingInterval time.Duration
	// WriteTimeout bounds one message write: a peer that accepts nothing for
	// this long is too slow and the session ends.
	WriteTimeout time.Duration
	// Coalesce, on a connection over a ReadAheadConn (the upstream side),
	// makes ReadMessage return the binary messages that have already
	// arrived as one, up to coalesceSize: a relay then writes what it has in
	// one message and one system call instead of one per virt-handler
	// message. It never waits for a message that has not begun to arrive.
	Coalesce bool
}

// Buffers. An idle session holds none of the large ones: a relayed
// WebSocket keeps only its small socket read buffer; the message buffer and
// gorilla's write buffer come from pools while a message is in flight.
const (
	// ReadBufferSize is gorilla's read buffer, for the Dialer (upstream)
	// and the Upgrader (client): the Upgrader must not keep net/http's
	// 4 KiB reader instead, which would keep net/http's whole connection
	// too. It holds frame headers and small messages only: a read into a
	// message buffer at least this large bypasses it (bufio reads straight
	// into the caller's slice), and on a ReadAheadConn or TLS, which
	// buffer below it, a refill is a copy, not a system call, so small
	// costs nothing but saves idle memory: every session keeps two. It
	// must hold a control frame's payload (125 bytes), which gorilla
	// reads in one piece.
	ReadBufferSize = 256
	// WriteBufferSize is the write buffer that gorilla takes from
	// WriteBufferPool for the duration of one message. A server writes the
	// first WriteBufferSize bytes of a message through it and the rest
	// straight from the message, in one writev(2); a client (the upstream
	// side, which must mask) writes frames of this size.
	WriteBufferSize = 4 << 10
	// messageBufferSize is the pooled message buffer: a whole message from
	// virt-handler (32 KiB, kubecli's WebsocketMessageBufferSize) fits. A
	// larger message grows its own buffer, which is dropped afterwards.
	messageBufferSize = 32 << 10
	// coalesceSize is the pooled buffer of a coalescing WS, and the most it
	// gathers: as much as a ReadAheadConn reads at once.
	coalesceSize = readAheadSize
)

// writeBuffers is WriteBufferPool's pool.
var writeBuffers sync.Pool

// WriteBufferPool is the pool of write buffers for every relayed WebSocket,
// for the WriteBufferPool of gorilla's Upgrader and Dialer, with
// WriteBufferSize.
func WriteBufferPool() websocket.BufferPool { return &writeBuffers }

// messageBuffers holds *[]byte of messageBufferSize, coalesceBuffers of
// coalesceSize.
var (
	messageBuffers  = sync.Pool{New: func() any { return newBuffer(messageBufferSize) }}
	coalesceBuffers = sync.Pool{New: func() any { return newBuffer(coalesceSize) }}
)

func newBuffer(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

// getBuffer takes a *[]byte of n bytes from pool, whose New makes them; a
// fresh one should the pool ever hold anything else.
func getBuffer(pool *sync.Pool, n int) *[]byte {
	if b, ok := pool.Get().(*[]byte); ok {
		return b
	}
	return newBuffer(n)
}

// buffered is a connection that knows how many bytes have arrived and not
// been read: a ReadAheadConn.
type buffered interface{ Buffered() int }

// bufferedUnder finds the ReadAheadConn under c, through TLS; nil if none.
func bufferedUnder(c net.Conn) buffered {
	for c != nil {
		switch v := c.(type) {
		case buffered:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// WS is a WebSocket Endpoint. One goroutine may read and one may write;
// Close may be called from any goroutine, more than once. ReadMessage
// returns a message in a pooled buffer that is valid until the next call,
// which is how Relay uses it (a message is written before the next read);
// the buffer goes back to the pool before that call waits for the next
// message, so an idle WS holds none.
type WS struct {
	conn      *websocket.Conn
	opts      WSOptions
	done      chan struct{}
	closeOnce sync.Once
	pinger    *time.Timer
	// msg is the pooled buffer of the message last returned, msgKind its
	// kind; both belong to the reading goroutine.
	msg     *[]byte
	msgKind int
	// arrived is the ReadAheadConn under a coalescing WS; next is a message
	// that coalescing began and could not join (not binary), returned by
	// the next ReadMessage.
	arrived  buffered
	next     io.Reader
	nextKind int
	// readDeadline is the read deadline last set; data moves it forward only
	// once half a ping interval of it is spent, not on every message. It
	// belongs to the reading goroutine (pongs are handled on it too).
	readDeadline time.Time
	// writeDeadline is the deadline last set; it is moved forward only once
	// it is nearer than half the write timeout, not on every message.
	writeDeadline time.Time
}

// NewWS applies opts to conn and starts its pings.
func NewWS(conn *websocket.Conn, opts WSOptions) *WS {
	w := &WS{conn: conn, opts: opts, done: make(chan struct{})}
	if opts.Coalesce {
		w.arrived = bufferedUnder(conn.NetConn())
	}
	conn.SetReadLimit(opts.ReadLimit)
	w.extendRead()
	conn.SetPongHandler(func(string) error { w.extendRead(); return nil })
	// A timer rather than a goroutine: an idle session parks nothing for its
	// pings. It is armed only once w.pinger is set.
	w.pinger = time.AfterFunc(time.Hour, w.ping)
	w.pinger.Reset(opts.PingInterval)
	return w
}

func (w *WS) pongWait() time.Duration { return 2 * w.opts.PingInterval }

// extendRead gives the peer pongWait from now to send anything.
func (w *WS) extendRead() {
	w.readDeadline = time.Now().Add(w.pongWait())
	_ = w.conn.SetReadDeadline(w.readDeadline)
}

// extendReadAfterData is extendRead for a data message: it moves the
// deadline only once half a ping interval of it is spent, so the peer
// always has at least 1.5 ping intervals, and a pong (which always
// extends) within them.
func (w *WS) extendReadAfterData() {
	if time.Until(w.readDeadline) < w.pongWait()-w.opts.PingInterval/2 {
		w.extendRead()
	}
}

// ping sends one ping and arms the next, until Close.
func (w *WS) ping() {
	select {
	case <-w.done:
		return
	default:
	}
	if err := w.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(controlWriteTimeout)); err != nil {
		return
	}
	w.pinger.Reset(w.opts.PingInterval)
}

// ReadMessage returns the next data message; any message from the peer
// proves it alive. Once Close has sent the close frame, the error that ends
// reading (normally the peer's close reply) drops the connection at once,
// so the peer sees the end without waiting for closeGrace.
func (w *WS) ReadMessage() (int, []byte, error) {
	w.release()
	kind, p, err := w.readMessage()
	if err != nil {
		w.release()
		select {
		case <-w.done:
			_ = w.conn.Close()
		default:
		}
		return 0, nil, err
	}
	w.extendReadAfterData()
	return kind, p, nil
}

// readMessage reads the next message into a pooled buffer, taken once the
// message has begun, and when coalescing, the binary messages that follow
// it and have already arrived.
func (w *WS) readMessage() (int, []byte, error) {
	kind, r, err := w.nextReader()
	if err != nil {
		return 0, nil, err
	}
	pool, size := &messageBuffers, messageBufferSize
	if w.arrived != nil {
		pool, size = &coalesceBuffers, coalesceSize
	}
	w.msg, w.msgKind = getBuffer(pool, size), kind
	b, err := w.readInto((*w.msg)[:0], r)
	if err != nil {
		return 0, nil, err
	}
	// Another message joins only while one of virt-handler's size fits.
	for kind == websocket.BinaryMessage && w.arrived != nil && cap(b)-len(b) >= messageBufferSize && w.arrived.Buffered() > 0 {
		k, r, err := w.conn.NextReader()
		if err != nil {
			break // the next call returns it again
		}
		if k != websocket.BinaryMessage {
			w.next, w.nextKind = r, k
			break
		}
		more, err := w.readInto(b, r)
		if err != nil {
			break // gorilla keeps the error for the next call; b is whole
		}
		b = more
	}
	return kind, b, nil
}

// nextReader is the message coalescing began, or the next one.
func (w *WS) nextReader() (int, io.Reader, error) {
	if r := w.next; r != nil {
		w.next = nil
		return w.nextKind, r, nil
	}
	return w.conn.NextReader()
}

// readInto appends the message r to b, growing it (within the read limit)
// when the message does not fit.
func (w *WS) readInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			// Full: an empty read says whether the message ended here.
			if _, err := r.Read(b[len(b):]); err == io.EOF {
				return b, nil
			} else if err != nil {
				return nil, err
			}
			b = append(b, 0)[:len(b)] // grow; the read limit bounds it
			*w.msg = b
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			*w.msg = b
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// release gives the last message's buffer back to the pool. A text message
// may be a secret (the SSH hello carries a key or password): its bytes are
// cleared first. A buffer grown past the pool's size is left to the GC.
func (w *WS) release() {
	if w.msg == nil {
		return
	}
	b := *w.msg
	if w.msgKind == websocket.TextMessage {
		clear(b)
	}
	switch cap(b) {
	case messageBufferSize:
		*w.msg = b[:cap(b)]
		messageBuffers.Put(w.msg)
	case coalesceSize:
		*w.msg = b[:cap(b)]
		coalesceBuffers.Put(w.msg)
	}
	w.msg = nil
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
		w.pinger.Stop()
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
