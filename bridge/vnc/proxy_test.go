package vnc

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/rfb"
)

// sent collects what the proxy sends upstream on its own.
type sent struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (s *sent) send(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, append([]byte(nil), p...))
	return nil
}

func (s *sent) all() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

// handshaken is a proxy past an RFB 3.8 handshake with security None and a
// 640x480 32-bit screen.
func handshaken(t *testing.T, adaptive bool) (*Proxy, *sent) {
	t.Helper()
	return handshakenWith(t, Options{Adaptive: adaptive})
}

// handshakenWith is handshaken with the session's options.
func handshakenWith(t *testing.T, opts Options) (*Proxy, *sent) {
	t.Helper()
	p := NewProxy(opts)
	s := &sent{}
	p.Start(s.send)
	t.Cleanup(p.Stop)
	client := func(b []byte) {
		t.Helper()
		if _, _, err := p.Client(0, b); err != nil {
			t.Fatal(err)
		}
	}
	p.Upstream([]byte("RFB 003.008\n"))
	client([]byte("RFB 003.008\n"))
	p.Upstream([]byte{1, byte(rfb.SecurityNone)})
	client([]byte{byte(rfb.SecurityNone)})
	p.Upstream([]byte{0, 0, 0, 0})
	client([]byte{1})
	init := binary.BigEndian.AppendUint16(nil, 640)
	init = binary.BigEndian.AppendUint16(init, 480)
	init = append(init, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0) // pixel format
	init = binary.BigEndian.AppendUint32(init, 0)                                // no name
	p.Upstream(init)
	return p, s
}

// updateBytes is a FramebufferUpdate with one 1x1 Raw rectangle.
func updateBytes() []byte {
	b := []byte{0, 0, 0, 1}
	b = append(b, 0, 0, 0, 0, 0, 1, 0, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(rfb.EncodingRaw))
	return append(b, 1, 2, 3, 4)
}

func TestProxyForwardsTheClientUnchangedInGoodTier(t *testing.T) {
	p, _ := handshaken(t, true)
	enc, _ := rfb.EncodeSetEncodings([]int32{rfb.EncodingRaw, rfb.EncodingTight, -223})
	fur := rfb.EncodeFramebufferUpdateRequest(false, 0, 0, 640, 480)
	key := []byte{4, 1, 0, 0, 0, 0, 0, 0x61}
	in := append(append(append([]byte(nil), enc...), fur...), key...)
	out, input, err := p.Client(0, in)
	if err != nil || string(out) != string(in) || !input {
		t.Fatalf("Client = %x, %v, %v; want the bytes unchanged and input", out, input, err)
	}
	if _, input, _ := p.Client(0, rfb.EncodeFramebufferUpdateRequest(false, 0, 0, 1, 1)); input {
		t.Fatal("an update request counted as user input")
	}
}

func TestProxyRewritesSetEncodingsForTheTier(t *testing.T) {
	p, _ := handshaken(t, true)
	p.mu.Lock()
	p.ctl.tier = Poor
	p.mu.Unlock()
	enc, _ := rfb.EncodeSetEncodings([]int32{rfb.EncodingRaw, rfb.EncodingTight})
	out, _, err := p.Client(0, enc)
	want, _ := rfb.EncodeSetEncodings([]int32{rfb.EncodingTight, rfb.EncodingRaw, encCompressLevel9})
	if err != nil || string(out) != string(want) {
		t.Fatalf("Client = %x, %v; want %x", out, err, want)
	}
}

func TestProxyHoldsIncrementalRequestsUntilTheUpdateArrives(t *testing.T) {
	p, s := handshaken(t, true)
	inc := rfb.EncodeFramebufferUpdateRequest(true, 0, 0, 640, 480)
	if out, _, _ := p.Client(0, inc); string(out) != string(inc) {
		t.Fatalf("the first incremental request was not forwarded: %x", out)
	}
	// QEMU holds it until the screen changes; the client's next one waits
	// in the bridge instead of piling up.
	if out, _, _ := p.Client(0, inc); len(out) != 0 {
		t.Fatalf("a second incremental request was forwarded while one is unanswered: %x", out)
	}
	p.Upstream(updateBytes())
	p.Delivered(nil)
	deadline := time.Now().Add(2 * time.Second)
	for len(s.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.all(); len(got) != 1 || string(got[0]) != string(inc) {
		t.Fatalf("after the update the proxy sent %x, want the held request", got)
	}
}

func TestProxyClosesOnUnknownClientMessages(t *testing.T) {
	p, _ := handshaken(t, false)
	_, _, err := p.Client(0, []byte{99, 0, 0, 0})
	var ee *relay.EndingError
	if !errors.As(err, &ee) || ee.Code != relay.CodeProtocolError || ee.Reason == "" {
		t.Fatalf("err = %v, want a protocol-error ending with a reason", err)
	}
}

func TestProxyPassesServerBytesItCannotFrame(t *testing.T) {
	p, _ := handshaken(t, true)
	p.Upstream([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0x7f, 0, 0, 0}) // unknown encoding
	p.Delivered(nil)
	p.Upstream([]byte{1, 2, 3})
	p.Delivered(nil)
	if !p.trackerDown {
		t.Fatal("the tracker should have given up")
	}
}

func TestProxyArmsNoTimerWhenNothingIsDue(t *testing.T) {
	p, _ := handshaken(t, false)
	p.Upstream(updateBytes())
	p.Delivered(nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wakeAt.IsZero() {
		t.Fatalf("a proxy with the controller off and no log interval armed its timer for %s", p.wakeAt)
	}
}

func TestProxyAsksForTheIdleRepaintThenSleeps(t *testing.T) {
	p, s := handshaken(t, true)
	if _, _, err := p.Client(0, rfb.EncodeFramebufferUpdateRequest(false, 0, 0, 640, 480)); err != nil {
		t.Fatal(err)
	}
	p.Upstream(updateBytes())
	p.Delivered(nil)
	deadline := time.Now().Add(idleRepaint + 2*time.Second)
	for len(s.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	want := rfb.EncodeFramebufferUpdateRequest(false, 0, 0, 640, 480)
	if got := s.all(); len(got) != 1 || string(got[0]) != string(want) {
		t.Fatalf("after a still second the proxy sent %x, want one non-incremental request", got)
	}
	// The client never replies and nothing moves: once the window that
	// measured the wait closes, nothing more is due until something happens.
	time.Sleep(2 * window)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moved || len(p.held) > 0 || !p.wakeAt.IsZero() {
		t.Fatalf("after the repaint: moved %v, held %x, timer armed for %s; want nothing due", p.moved, p.held, p.wakeAt)
	}
}

// wire is m's bytes on the wire.
func wire(t *testing.T, m interface {
	AppendBinary([]byte) ([]byte, error)
}) []byte {
	t.Helper()
	b, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProxyViewOnlyDropsInputAndKeepsTheScreen(t *testing.T) {
	dropped := map[string][]byte{
		"KeyEvent":             wire(t, rfb.KeyEvent{Down: true, Key: 0xffe3}),
		"PointerEvent":         wire(t, rfb.PointerEvent{Buttons: 1, X: 10, Y: 20}),
		"QEMUExtendedKeyEvent": wire(t, rfb.QEMUExtendedKeyEvent{Down: true, Keysym: 0xffff, Keycode: 0xe053}),
		"ClientCutText":        wire(t, rfb.ClientCutText{Text: []byte("secret")}),
		"SetDesktopSize":       wire(t, rfb.SetDesktopSize{Width: 800, Height: 600, Screens: []rfb.Screen{{Width: 800, Height: 600}}}),
		"XVP":                  wire(t, rfb.XVP{Version: 1, Code: 4}),
	}
	kept := map[string][]byte{
		"FramebufferUpdateRequest": rfb.EncodeFramebufferUpdateRequest(false, 0, 0, 640, 480),
		"SetPixelFormat":           wire(t, rfb.SetPixelFormat{Format: rfb.PixelFormat{BitsPerPixel: 32, Depth: 24, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255, RedShift: 16, GreenShift: 8}}),
	}
	for name, msg := range dropped {
		t.Run(name, func(t *testing.T) {
			p, _ := handshakenWith(t, Options{ViewOnly: true})
			out, input, err := p.Client(0, msg)
			if err != nil || len(out) != 0 || input {
				t.Fatalf("view only: Client = %x, %v, %v; want it dropped, not input", out, input, err)
			}
			full, _ := handshakenWith(t, Options{})
			if out, _, err := full.Client(0, msg); err != nil || string(out) != string(msg) {
				t.Fatalf("full control: Client = %x, %v; want it forwarded", out, err)
			}
		})
	}
	for name, msg := range kept {
		t.Run(name, func(t *testing.T) {
			p, _ := handshakenWith(t, Options{ViewOnly: true})
			out, input, err := p.Client(0, msg)
			if err != nil || string(out) != string(msg) || input {
				t.Fatalf("view only: Client = %x, %v, %v; want it forwarded, not input", out, input, err)
			}
		})
	}
	// Input between screen messages in one WebSocket message: only the
	// input goes.
	p, _ := handshakenWith(t, Options{ViewOnly: true})
	fur := kept["FramebufferUpdateRequest"]
	in := append(append(append([]byte(nil), fur...), dropped["KeyEvent"]...), fur...)
	if out, _, err := p.Client(0, in); err != nil || string(out) != string(append(append([]byte(nil), fur...), fur...)) {
		t.Fatalf("view only, mixed: Client = %x, %v", out, err)
	}
}
