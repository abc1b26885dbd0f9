package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// The source's framebuffer: 640x480 at 32 bits a pixel, sent as one Raw
// rectangle per FramebufferUpdate (1,228,816 bytes).
const (
	SourceWidth   = 640
	SourceHeight  = 480
	bytesPerPixel = 4
	// updateHeaderLen is FramebufferUpdate's 4-byte header and one 12-byte
	// rectangle header.
	updateHeaderLen = 4 + 12
	// UpdateLen is one whole FramebufferUpdate on the wire.
	UpdateLen = updateHeaderLen + SourceWidth*SourceHeight*bytesPerPixel
	// EchoLen is the size of the messages the latency test sends and the
	// source echoes: the size of an input event batch.
	EchoLen = 100
	// cutTextHeaderLen is the header of ClientCutText and ServerCutText.
	cutTextHeaderLen = 8
	// maxCutText bounds what the source accepts from a client.
	maxCutText = 1 << 20
)

// desktopName is ServerInit's name.
const desktopName = "virtstation-bench"

// Source is an RFB 3.8 server (security type None) for the benchmark.
// After the handshake it does two things, each on the client's word:
//
//   - from the first FramebufferUpdateRequest on it streams
//     FramebufferUpdates of one Raw rectangle as fast as the connection
//     takes them, whatever the client asks for next (a QEMU with a screen
//     that changes faster than the link, and no pause between updates);
//   - it answers every ClientCutText with a ServerCutText of the same text,
//     so the latency test's messages go through RFB parsers both ways.
//
// It parses every client message by its RFB length (SetPixelFormat,
// SetEncodings, FramebufferUpdateRequest, KeyEvent, PointerEvent,
// ClientCutText) and ends the connection on anything else. Each connection
// has one reading and one writing goroutine; writes are serialized.
type Source struct {
	ln net.Listener
	wg sync.WaitGroup
}

// NewSource listens on a free loopback port and serves until Close.
func NewSource() (*Source, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Source{ln: ln}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Addr is the source's host:port.
func (s *Source) Addr() string { return s.ln.Addr().String() }

// Close stops listening and waits for the accept loop; open connections
// end when their peers close them.
func (s *Source) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Source) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			_ = serveRFB(c)
		}()
	}
}

// serverPixelFormat is 32-bit true colour, depth 24, little-endian: QEMU's
// default and what noVNC asks for.
var serverPixelFormat = []byte{32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}

func serveRFB(c net.Conn) error {
	// Handshake: version, security None, result OK, ClientInit, ServerInit.
	if _, err := io.WriteString(c, "RFB 003.008\n"); err != nil {
		return err
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "RFB 003.008\n" {
		return fmt.Errorf("client version %q", buf)
	}
	if _, err := c.Write([]byte{1, 1}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		return err
	}
	if buf[0] != 1 {
		return fmt.Errorf("client chose security type %d", buf[0])
	}
	if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil { // ClientInit
		return err
	}
	init := binary.BigEndian.AppendUint16(nil, SourceWidth)
	init = binary.BigEndian.AppendUint16(init, SourceHeight)
	init = append(init, serverPixelFormat...)
	init = binary.BigEndian.AppendUint32(init, uint32(len(desktopName)))
	init = append(init, desktopName...)
	if _, err := c.Write(init); err != nil {
		return err
	}

	var wmu sync.Mutex
	stream := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stream:
			_ = streamUpdates(c, &wmu, done)
		case <-done:
		}
	}()
	return readClient(c, &wmu, stream)
}

// readClient frames the client's messages, starts the stream on the first
// update request and echoes cut text.
func readClient(c net.Conn, wmu *sync.Mutex, stream chan struct{}) error {
	streaming := false
	hdr := make([]byte, cutTextHeaderLen)
	echo := make([]byte, 0, cutTextHeaderLen+EchoLen)
	for {
		if _, err := io.ReadFull(c, hdr[:1]); err != nil {
			return err
		}
		var rest int
		switch hdr[0] {
		case 0: // SetPixelFormat
			rest = 19
		case 2: // SetEncodings: pad, u16 count, then count s32
			if _, err := io.ReadFull(c, hdr[1:4]); err != nil {
				return err
			}
			rest = 4 * int(binary.BigEndian.Uint16(hdr[2:4]))
		case 3: // FramebufferUpdateRequest
			rest = 9
			if !streaming {
				streaming = true
				close(stream)
			}
		case 4: // KeyEvent
			rest = 7
		case 5: // PointerEvent
			rest = 5
		case 6: // ClientCutText: 3 pad, u32 length, text
			if _, err := io.ReadFull(c, hdr[1:cutTextHeaderLen]); err != nil {
				return err
			}
			n := binary.BigEndian.Uint32(hdr[4:8])
			if n > maxCutText {
				return fmt.Errorf("cut text of %d bytes", n)
			}
			echo = append(echo[:0], 3, 0, 0, 0) // ServerCutText
			echo = binary.BigEndian.AppendUint32(echo, n)
			echo = append(echo, make([]byte, n)...)
			if _, err := io.ReadFull(c, echo[cutTextHeaderLen:]); err != nil {
				return err
			}
			wmu.Lock()
			_, err := c.Write(echo)
			wmu.Unlock()
			if err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("client message type %d", hdr[0])
		}
		if _, err := io.CopyN(io.Discard, c, int64(rest)); err != nil {
			return err
		}
	}
}

// streamUpdates writes whole FramebufferUpdates until the connection or the
// session ends. Each update changes: its first pixels carry its number and
// the rows it stamps move down the screen, so no two are equal.
func streamUpdates(c net.Conn, wmu *sync.Mutex, done <-chan struct{}) error {
	u := make([]byte, UpdateLen)
	u[0], u[3] = 0, 1 // FramebufferUpdate, one rectangle
	binary.BigEndian.PutUint16(u[8:], SourceWidth)
	binary.BigEndian.PutUint16(u[10:], SourceHeight)
	// encoding 0: Raw (bytes 12-15 stay zero)
	pixels := u[updateHeaderLen:]
	x := uint32(2463534242)
	for i := 0; i+4 <= len(pixels); i += 4 { // xorshift noise
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(pixels[i:], x)
	}
	const row = SourceWidth * bytesPerPixel
	for n := uint64(0); ; n++ {
		select {
		case <-done:
			return nil
		default:
		}
		binary.BigEndian.PutUint64(pixels, n)
		stripe := pixels[int(n%SourceHeight)*row:][:row]
		for i := range stripe {
			stripe[i] ^= byte(n)
		}
		wmu.Lock()
		_, err := c.Write(u)
		wmu.Unlock()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
	}
}
