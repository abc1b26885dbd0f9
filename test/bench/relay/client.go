package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// clientBuffer is what the client reads at once, and its WebSocket read
// buffer: the same on every path.
const clientBuffer = 64 << 10

// Client is one RFB client session over a byte stream: plain TCP or, as a
// browser's, binary WebSocket messages. Every client message is written in
// one Write, so over WebSocket each is one message, as noVNC sends them.
type Client struct {
	conn   io.ReadWriteCloser
	width  int
	height int
}

// DialTCP connects to an RFB server over plain TCP and completes the
// handshake.
func DialTCP(addr string) (*Client, error) {
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	return handshake(c)
}

// DialWS connects to an RFB server behind a WebSocket URL, offering the
// "binary" subprotocol as noVNC does, and completes the handshake.
func DialWS(url string) (*Client, error) {
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, Subprotocols: []string{"binary"}, ReadBufferSize: clientBuffer, WriteBufferSize: clientBuffer}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(-1)
	return handshake(&wsStream{ws: ws})
}

// handshake is RFB 3.8 with security None, a shared ClientInit, then
// SetPixelFormat (the server's own, 32-bit) and SetEncodings (Raw and
// DesktopSize), as a viewer sends them.
func handshake(conn io.ReadWriteCloser) (*Client, error) {
	c := &Client{conn: conn}
	if err := c.handshake(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rfb handshake: %w", err)
	}
	return c, nil
}

func (c *Client) handshake() error {
	buf := make([]byte, 24)
	if _, err := io.ReadFull(c.conn, buf[:12]); err != nil {
		return err
	}
	if _, err := c.conn.Write([]byte("RFB 003.008\n")); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.conn, buf[:1]); err != nil {
		return err
	}
	types := make([]byte, buf[0])
	if _, err := io.ReadFull(c.conn, types); err != nil {
		return err
	}
	if !slices.Contains(types, 1) {
		return fmt.Errorf("server offers no security type None: %v", types)
	}
	if _, err := c.conn.Write([]byte{1}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.conn, buf[:4]); err != nil {
		return err
	}
	if r := binary.BigEndian.Uint32(buf); r != 0 {
		return fmt.Errorf("security result %d", r)
	}
	if _, err := c.conn.Write([]byte{1}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.conn, buf[:24]); err != nil {
		return err
	}
	c.width, c.height = int(binary.BigEndian.Uint16(buf)), int(binary.BigEndian.Uint16(buf[2:]))
	if _, err := io.CopyN(io.Discard, c.conn, int64(binary.BigEndian.Uint32(buf[20:]))); err != nil {
		return err
	}
	spf := append([]byte{0, 0, 0, 0}, serverPixelFormat...)
	if _, err := c.conn.Write(spf); err != nil {
		return err
	}
	se := []byte{2, 0, 0, 2, 0, 0, 0, 0}                       // Raw
	se = binary.BigEndian.AppendUint32(se, uint32(0xFFFFFF21)) // DesktopSize (-223)
	_, err := c.conn.Write(se)
	return err
}

// Close ends the session.
func (c *Client) Close() error { return c.conn.Close() }

// updateRequest is a FramebufferUpdateRequest for the whole screen.
func (c *Client) updateRequest(incremental bool) []byte {
	b := []byte{3, 0}
	if incremental {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(c.width))
	return binary.BigEndian.AppendUint16(b, uint16(c.height))
}

// Stream asks for the whole screen, then reads the source's updates until
// the connection ends, adding the bytes it reads to n. After each whole
// update it sends an incremental update request, as noVNC does, and it
// checks that each update starts where the last ended, so a path that
// loses, adds or reorders a byte fails the run.
func (c *Client) Stream(n *atomic.Int64) error {
	if _, err := c.conn.Write(c.updateRequest(false)); err != nil {
		return err
	}
	incremental := c.updateRequest(true)
	buf := make([]byte, clientBuffer)
	pos := 0 // offset within the current update
	for {
		k, err := c.conn.Read(buf)
		if k > 0 {
			n.Add(int64(k))
			b := buf[:k]
			for len(b) > 0 {
				if pos == 0 && b[0] != 0 {
					return fmt.Errorf("update does not start with FramebufferUpdate: type %d", b[0])
				}
				step := min(len(b), UpdateLen-pos)
				pos += step
				b = b[step:]
				if pos == UpdateLen {
					pos = 0
					if _, err := c.conn.Write(incremental); err != nil {
						return err
					}
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// Echo sends one ClientCutText of EchoLen bytes (92 bytes of text) and
// waits for the source's ServerCutText with the same text; it returns the
// round trip.
func (c *Client) Echo(seq uint64, msg, reply []byte) (time.Duration, error) {
	msg = append(msg[:0], 6, 0, 0, 0) // ClientCutText
	msg = binary.BigEndian.AppendUint32(msg, EchoLen-cutTextHeaderLen)
	msg = binary.BigEndian.AppendUint64(msg, seq)
	for len(msg) < EchoLen {
		msg = append(msg, 'a'+byte(len(msg)%26))
	}
	start := time.Now()
	if _, err := c.conn.Write(msg); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c.conn, reply[:EchoLen]); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if reply[0] != 3 || !bytes.Equal(reply[4:EchoLen], msg[4:]) {
		return 0, errors.New("echo: the reply is not the message's ServerCutText")
	}
	return d, nil
}

// wsStream is a WebSocket as a byte stream: each Write is one binary
// message; Read goes through messages as they come. One goroutine may read
// and one may write.
type wsStream struct {
	ws *websocket.Conn
	r  io.Reader
}

func (s *wsStream) Read(p []byte) (int, error) {
	for {
		if s.r == nil {
			_, r, err := s.ws.NextReader()
			if err != nil {
				return 0, err
			}
			s.r = r
		}
		n, err := s.r.Read(p)
		if errors.Is(err, io.EOF) {
			s.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func (s *wsStream) Write(p []byte) (int, error) {
	if err := s.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *wsStream) Close() error { return s.ws.Close() }
