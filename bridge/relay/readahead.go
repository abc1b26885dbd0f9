package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// readAheadSize is how much a ReadAheadConn reads from its socket at once.
// A read costs a system call and, on the sending side, a wake-up, whatever
// its size: reading what has queued up in one call instead of one
// virt-handler message (32 KiB) at a time is what lets the bridge relay
// bulk VNC at a fraction of the CPU.
const readAheadSize = 256 << 10

// readAheadBuffers holds *[]byte of readAheadSize.
var readAheadBuffers = sync.Pool{New: func() any {
	b := make([]byte, readAheadSize)
	return &b
}}

// ReadAheadConn is a TCP connection that reads as much as has arrived, up
// to readAheadSize, into a pooled buffer and serves reads from it. It holds
// the buffer only while it has unread bytes: it waits for the socket to
// become readable without one, so an idle connection holds nothing.
// Buffered says how many bytes have arrived and not been read, which lets a
// WS gather the messages already received into one write (see
// WSOptions.Coalesce). One goroutine may read; the rest of net.Conn is the
// socket's.
type ReadAheadConn struct {
	net.Conn
	raw  syscall.RawConn
	buf  *[]byte // nil while empty
	r, w int     // unread bytes are (*buf)[r:w]
}

// NewReadAheadConn wraps c, or returns it as it is when it is not a socket.
func NewReadAheadConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &ReadAheadConn{Conn: c, raw: raw}
}

// DialReadAhead dials like a net.Dialer and wraps the connection in a
// ReadAheadConn: a NetDialContext for gorilla's Dialer.
func DialReadAhead(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return NewReadAheadConn(c), nil
}

// Buffered is the number of bytes read from the socket and not yet read
// from c.
func (c *ReadAheadConn) Buffered() int { return c.w - c.r }

// Read implements net.Conn.
func (c *ReadAheadConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.buf == nil {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*c.buf)[c.r:c.w])
	c.r += n
	if c.r == c.w {
		readAheadBuffers.Put(c.buf)
		c.buf, c.r, c.w = nil, 0, 0
	}
	return n, nil
}

// fill reads what has arrived into a pooled buffer, waiting (with the
// connection's read deadline) until something has. It takes the buffer
// only once the socket is readable.
func (c *ReadAheadConn) fill() error {
	var (
		b    *[]byte
		n    int
		rerr error
	)
	err := c.raw.Read(func(fd uintptr) bool {
		b = getBuffer(&readAheadBuffers, readAheadSize)
		for {
			n, rerr = syscall.Read(int(fd), *b)
			if !errors.Is(rerr, syscall.EINTR) {
				break
			}
		}
		if errors.Is(rerr, syscall.EAGAIN) {
			readAheadBuffers.Put(b)
			b = nil
			return false // wait until readable, then try again
		}
		return true
	})
	if err == nil && rerr != nil {
		err = &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("read", rerr)}
	}
	if err == nil && n <= 0 {
		err = io.EOF
	}
	if err != nil {
		if b != nil {
			readAheadBuffers.Put(b)
		}
		return err
	}
	c.buf, c.r, c.w = b, 0, n
	return nil
}
