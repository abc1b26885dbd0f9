package vnc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/rfb"
)

// noVNC 1.7's session start, from @novnc/novnc core/rfb.js
// (_negotiateServerInit, _sendEncodings) in a browser without H.264
// decoding: a 32-bit true-colour pixel format, then its encodings in
// preference order with its default JPEG quality (6) and compression
// level (2), then a full update request; after that one incremental
// request after each FramebufferUpdate, since QEMU offers no continuous
// updates.
const (
	noVNCQualityLevel     = 6
	noVNCCompressionLevel = 2
	// encodingJPEG and encodingVMwareCursor are in noVNC's list but not in
	// package rfb: QEMU implements neither and never sends them.
	encodingJPEG         int32 = 21
	encodingVMwareCursor int32 = 0x574d5664
)

// noVNCEncodings is noVNC's SetEncodings list with compression level
// level: its encodings in preference order, its JPEG quality and
// compression level, then its pseudo-encodings.
func noVNCEncodings(level int) []int32 {
	return slices.Concat(noVNCReal, []int32{
		rfb.EncodingJPEGQuality0 + noVNCQualityLevel,
		rfb.EncodingCompressLevel0 + int32(level),
	}, noVNCPseudo)
}

// noVNCReal are the encodings noVNC lists first, best first.
var noVNCReal = []int32{
	rfb.EncodingCopyRect,
	rfb.EncodingTight,
	rfb.EncodingTightPNG,
	rfb.EncodingZRLE,
	encodingJPEG,
	rfb.EncodingHextile,
	rfb.EncodingRRE,
	rfb.EncodingZlib,
	rfb.EncodingRaw,
}

// noVNCPseudo are the pseudo-encodings noVNC lists after its levels.
var noVNCPseudo = []int32{
	rfb.EncodingDesktopSize,
	rfb.EncodingLastRect,
	rfb.EncodingQEMUExtendedKeyEvent,
	rfb.EncodingQEMULEDState,
	rfb.EncodingExtendedDesktopSize,
	rfb.EncodingXVP,
	rfb.EncodingFence,
	rfb.EncodingContinuousUpdates,
	rfb.EncodingDesktopName,
	rfb.EncodingExtendedClipboard,
	rfb.EncodingExtendedMouseButtons,
	encodingVMwareCursor,
	rfb.EncodingCursor,
}

// noVNCPixelFormat is RFB.messages.pixelFormat(sock, 24, true).
var noVNCPixelFormat = rfb.PixelFormat{
	BitsPerPixel: 32, Depth: 24, TrueColour: true,
	RedMax: 255, GreenMax: 255, BlueMax: 255,
	RedShift: 0, GreenShift: 8, BlueShift: 16,
}

// noVNC is a client that speaks as noVNC does and frames everything the
// server sends with package rfb, timing each update from the request it
// answers. run is its only goroutine; the recorder is shared with the
// benchmark under its own lock.
type noVNC struct {
	conn   *websocket.Conn
	link   *throttledConn
	out    *rfb.ClientParser
	in     *rfb.ServerTracker
	width  uint16
	height uint16
	// requested holds when each unanswered request was sent.
	requested []time.Time
	rec       *recorder
}

// dialNoVNC connects to url over a link of rate bytes a second, completes
// the RFB 3.8 handshake with security None and starts the session with
// compression level level (noVNC's default is noVNCCompressionLevel).
func dialNoVNC(ctx context.Context, url string, rate float64, level int, rec *recorder) (*noVNC, error) {
	var link *throttledConn
	dial := dialThrottled(rate)
	d := websocket.Dialer{
		HandshakeTimeout: rigTimeout,
		NetDialContext: func(ctx context.Context, network, addr string) (netConn net.Conn, err error) {
			netConn, err = dial(ctx, network, addr)
			if err == nil {
				link = netConn.(*throttledConn)
			}
			return netConn, err
		},
	}
	conn, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	s := rfb.NewSession()
	c := &noVNC{conn: conn, link: link, out: rfb.NewClientParser(s), in: rfb.NewServerTracker(s), rec: rec}
	if err := c.handshake(level); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *noVNC) handshake(level int) error {
	if err := c.conn.SetReadDeadline(time.Now().Add(rigTimeout)); err != nil {
		return err
	}
	steps := []struct {
		want rfb.EventKind
		send func(rfb.Event) (rfb.Body, error)
	}{
		{rfb.EventServerVersion, func(rfb.Event) (rfb.Body, error) { return rfb.ProtocolVersion{Major: 3, Minor: 8}, nil }},
		{rfb.EventSecurityTypes, func(e rfb.Event) (rfb.Body, error) {
			if !slices.Contains(e.SecurityTypes, rfb.SecurityNone) {
				return nil, fmt.Errorf("security types %v lack None", e.SecurityTypes)
			}
			return rfb.SecurityChoice{Type: rfb.SecurityNone}, nil
		}},
		{rfb.EventSecurityResult, func(e rfb.Event) (rfb.Body, error) {
			if !e.OK {
				return nil, fmt.Errorf("security None refused: %s", e.Reason)
			}
			return rfb.ClientInit{Shared: true}, nil
		}},
	}
	for _, st := range steps {
		e, err := c.nextEvent()
		if err != nil {
			return err
		}
		if e.Kind != st.want {
			return fmt.Errorf("event %v, want %v", e.Kind, st.want)
		}
		msg, err := st.send(e)
		if err != nil {
			return err
		}
		if err := c.send(msg); err != nil {
			return err
		}
	}
	e, err := c.nextEvent()
	if err != nil {
		return err
	}
	if e.Kind != rfb.EventServerInit {
		return fmt.Errorf("event %v, want ServerInit", e.Kind)
	}
	c.width, c.height = e.Init.Width, e.Init.Height
	if err := c.send(rfb.SetPixelFormat{Format: noVNCPixelFormat}); err != nil {
		return err
	}
	if err := c.send(rfb.SetEncodings{Encodings: noVNCEncodings(level)}); err != nil {
		return err
	}
	return c.request(false)
}

// nextEvent reads until the tracker reports something; only for the
// handshake, where each server message comes alone.
func (c *noVNC) nextEvent() (rfb.Event, error) {
	for {
		_, p, err := c.conn.ReadMessage()
		if err != nil {
			return rfb.Event{}, err
		}
		var events []rfb.Event
		if err := c.in.Feed(p, func(e rfb.Event) { events = append(events, e) }); err != nil {
			return rfb.Event{}, fmt.Errorf("the RFB stream is broken: %w", err)
		}
		switch len(events) {
		case 0:
			continue
		case 1:
			return events[0], nil
		}
		return rfb.Event{}, fmt.Errorf("%d server messages at once during the handshake", len(events))
	}
}

// send writes m after following it with the client parser, which the
// tracker needs.
func (c *noVNC) send(m interface{ AppendBinary([]byte) ([]byte, error) }) error {
	b, err := m.AppendBinary(nil)
	if err != nil {
		return err
	}
	if err := c.out.Feed(b, func(rfb.Message) error { return nil }); err != nil {
		return fmt.Errorf("the client wrote bad RFB: %w", err)
	}
	return c.conn.WriteMessage(websocket.BinaryMessage, b)
}

func (c *noVNC) request(incremental bool) error {
	c.requested = append(c.requested, time.Now())
	return c.send(rfb.FramebufferUpdateRequest{Incremental: incremental, Width: c.width, Height: c.height})
}

// run reads updates and asks for the next after each, until the
// connection ends; it returns the reason, nil when closed by close.
func (c *noVNC) run() error {
	if err := c.conn.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	pixels := 0
	for {
		_, p, err := c.conn.ReadMessage()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		ends := 0
		var painted []paint
		var encodings []int32
		ferr := c.in.Feed(p, func(e rfb.Event) {
			switch e.Kind {
			case rfb.EventUpdateStart:
				pixels = 0
			case rfb.EventRect:
				encodings = append(encodings, e.Rect.Encoding)
				if isPixels(e.Rect) {
					pixels++
				}
			case rfb.EventUpdateEnd:
				ends++
				if pixels > 0 && len(c.requested) > 0 {
					// The update answers every request sent before it ended
					// (QEMU merges them); it was awaited since the oldest.
					painted = append(painted, paint{asked: c.requested[0], bytes: e.Bytes})
					c.requested = c.requested[:0]
				}
			}
		})
		now := time.Now()
		c.rec.received(now, painted, encodings)
		if ferr != nil {
			return fmt.Errorf("the RFB stream is broken: %w", ferr)
		}
		for range ends {
			if err := c.request(true); err != nil {
				return err
			}
		}
	}
}

func (c *noVNC) close() { _ = c.conn.NetConn().Close() }

// isPixels says whether a rectangle carries pixels rather than a
// pseudo-encoding.
func isPixels(r rfb.Rect) bool {
	return r.Encoding >= 0 && r.Encoding < 0x100 || r.Encoding == rfb.EncodingTightPNG
}

// paint is one update that painted pixels: when the request it answers
// was sent and its size.
type paint struct {
	asked time.Time
	bytes int64
}

// recorder collects what the client saw during the measured span.
type recorder struct {
	mu        sync.Mutex
	measuring bool
	latencies []time.Duration
	bytes     int64         // of the updates in latencies
	rects     map[int32]int // rectangles by encoding
}

func (r *recorder) received(now time.Time, painted []paint, encodings []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.measuring {
		return
	}
	for _, u := range painted {
		r.latencies = append(r.latencies, now.Sub(u.asked))
		r.bytes += u.bytes
	}
	for _, e := range encodings {
		r.rects[e]++
	}
}

func (r *recorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.measuring, r.bytes, r.latencies, r.rects = true, 0, nil, map[int32]int{}
}

// stop ends the span and returns its updates' latencies, their bytes in
// all and the rectangles by encoding.
func (r *recorder) stop() (latencies []time.Duration, bytes int64, rects map[int32]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.measuring = false
	return slices.Clone(r.latencies), r.bytes, r.rects
}
