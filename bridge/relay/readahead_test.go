package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"
)

// pipePair is a loopback TCP connection: the near end wrapped in a
// ReadAheadConn, the far end plain.
func pipePair(t *testing.T) (*ReadAheadConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := DialReadAhead(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far := <-accepted
	if far == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = c.Close(); _ = far.Close() })
	ra, ok := c.(*ReadAheadConn)
	if !ok {
		t.Fatalf("DialReadAhead returned %T", c)
	}
	return ra, far
}

func TestReadAheadConnReadsEverythingInOrderAndHoldsNoBufferWhenDrained(t *testing.T) {
	c, far := pipePair(t)
	want := make([]byte, 3*readAheadSize+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		_, _ = far.Write(want)
		_ = far.Close()
	}()
	var got []byte
	buf := make([]byte, 10_000) // not a divisor of anything here
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if c.Buffered() == 0 && c.buf != nil {
			t.Fatal("a drained ReadAheadConn still holds its buffer")
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written in order", len(got), len(want))
	}
}

func TestReadAheadConnCountsWhatHasArrived(t *testing.T) {
	c, far := pipePair(t)
	if _, err := far.Write([]byte("hello, world")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if n, err := io.ReadFull(c, b); err != nil || string(b[:n]) != "hello" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
	if got := c.Buffered(); got != len(", world") {
		t.Fatalf("Buffered = %d, want %d", got, len(", world"))
	}
}

func TestReadAheadConnKeepsDeadlines(t *testing.T) {
	c, _ := pipePair(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if c.buf != nil {
		t.Fatal("a ReadAheadConn waiting for data holds a buffer")
	}
}

// wsOverReadAhead dials a WebSocket server whose handler is serve, over a
// ReadAheadConn, and wraps the client side in a coalescing WS.
func wsOverReadAhead(t *testing.T, serve func(*websocket.Conn)) *WS {
	t.Helper()
	ws, _ := wsOverReadAheadSocket(t, serve)
	return ws
}

// wsOverReadAheadSocket is wsOverReadAhead that also returns the client's
// socket, to see what has arrived in it.
func wsOverReadAheadSocket(t *testing.T, serve func(*websocket.Conn)) (*WS, *net.TCPConn) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		serve(c)
	}))
	t.Cleanup(srv.Close)
	var sock *net.TCPConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := DialReadAhead(ctx, network, addr)
		if ra, ok := c.(*ReadAheadConn); ok {
			sock, _ = ra.Conn.(*net.TCPConn)
		}
		return c, err
	}
	d := websocket.Dialer{NetDialContext: dial, ReadBufferSize: ReadBufferSize,
		WriteBufferSize: WriteBufferSize, WriteBufferPool: WriteBufferPool()}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := NewWS(conn, WSOptions{ReadLimit: 4 << 20, PingInterval: time.Minute, WriteTimeout: time.Minute, Coalesce: true})
	t.Cleanup(func() { _ = ws.Close(websocket.CloseNormalClosure, "") })
	return ws, sock
}

// waitQueued waits until at least n unread bytes are queued in sock's
// receive buffer.
func waitQueued(t *testing.T, sock *net.TCPConn, n int) {
	t.Helper()
	raw, err := sock.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int
		var ioctlErr error
		if err := raw.Control(func(fd uintptr) { queued, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
			t.Fatal(err)
		}
		if ioctlErr != nil {
			t.Fatal(ioctlErr)
		}
		if queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes queued in the socket after 10 s, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCoalescingWSJoinsBinaryMessagesThatHaveArrived(t *testing.T) {
	chunk := func(i, n int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, n) }
	dialed := make(chan struct{})
	ws, sock := wsOverReadAheadSocket(t, func(c *websocket.Conn) {
		// Not before the handshake is read: what arrives with it is
		// read ahead with it.
		<-dialed
		for i := range 4 {
			_ = c.WriteMessage(websocket.BinaryMessage, chunk(i, 8<<10))
		}
		_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"note"}`))
		_ = c.WriteMessage(websocket.BinaryMessage, chunk(9, 100))
		_, _, _ = c.ReadMessage() // until the client closes
	})
	close(dialed)
	// Everything has arrived: four 8 KiB messages with 4-byte headers, the
	// text message and the last one with 2-byte headers.
	waitQueued(t, sock, 4*(4+8<<10)+2+len(`{"type":"note"}`)+2+100)
	var want []byte
	for i := range 4 {
		want = append(want, chunk(i, 8<<10)...)
	}
	kind, p, err := ws.ReadMessage()
	if err != nil || kind != websocket.BinaryMessage || !bytes.Equal(p, want) {
		t.Fatalf("first read: kind %d, %d bytes, %v; want the four binary messages as one (%d bytes)", kind, len(p), err, len(want))
	}
	kind, p, err = ws.ReadMessage()
	if err != nil || kind != websocket.TextMessage || string(p) != `{"type":"note"}` {
		t.Fatalf("second read: kind %d %q %v; want the text message alone", kind, p, err)
	}
	kind, p, err = ws.ReadMessage()
	if err != nil || kind != websocket.BinaryMessage || !bytes.Equal(p, chunk(9, 100)) {
		t.Fatalf("third read: kind %d %q %v", kind, p, err)
	}
}

func TestWSReadsMessagesOfAnySizeIntoPooledBuffers(t *testing.T) {
	sizes := []int{0, 1, messageBufferSize - 1, messageBufferSize, messageBufferSize + 1, 3 * coalesceSize}
	ws := wsOverReadAhead(t, func(c *websocket.Conn) {
		for i, n := range sizes {
			_ = c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte{byte('a' + i)}, n)) // text: never joined
		}
		_, _, _ = c.ReadMessage()
	})
	for i, n := range sizes {
		kind, p, err := ws.ReadMessage()
		if err != nil || kind != websocket.TextMessage || !bytes.Equal(p, bytes.Repeat([]byte{byte('a' + i)}, n)) {
			t.Fatalf("message of %d bytes: kind %d, %d bytes, %v", n, kind, len(p), err)
		}
	}
}
