package rfb

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// clientCase is one client message: its bytes and what it decodes to.
type clientCase struct {
	raw  []byte
	want Body
}

// clientMessages is every client message type in its forms. Padding is
// zero, so each body encodes back to its raw bytes.
func clientMessages() map[string]clientCase {
	var sixtyFour []int32
	var sixtyFourRaw []byte
	for i := range MaxEncodings {
		sixtyFour = append(sixtyFour, int32(-i))
		sixtyFourRaw = append(sixtyFourRaw, be32(uint32(int32(-i)))...)
	}
	var sixteen []Screen
	var sixteenRaw []byte
	for i := range MaxScreens {
		s := Screen{ID: uint32(i), X: uint16(i), Y: 2, Width: 100, Height: 200, Flags: 0x80000001}
		sixteen = append(sixteen, s)
		sixteenRaw = append(sixteenRaw, cat(be32(s.ID), be16(s.X), be16(s.Y), be16(s.Width), be16(s.Height), be32(s.Flags))...)
	}
	return map[string]clientCase{
		"SetPixelFormat 32-bit": {
			raw:  cat([]byte{0, 0, 0, 0}, []byte{32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}),
			want: SetPixelFormat{Format: pf32},
		},
		"SetPixelFormat 16-bit big-endian": {
			raw:  cat([]byte{0, 0, 0, 0}, []byte{16, 16, 1, 1, 0, 31, 0, 63, 0, 31, 11, 5, 0, 0, 0, 0}),
			want: SetPixelFormat{Format: pf16},
		},
		"SetEncodings": {
			raw:  cat([]byte{2, 0, 0, 5}, be32(7), be32(16), be32(0), be32(0xFFFFFF21), be32(0xC0A1E5CE)),
			want: SetEncodings{Encodings: []int32{EncodingTight, EncodingZRLE, EncodingRaw, EncodingDesktopSize, EncodingExtendedClipboard}},
		},
		"SetEncodings empty": {
			raw:  []byte{2, 0, 0, 0},
			want: SetEncodings{Encodings: []int32{}},
		},
		"SetEncodings at MaxEncodings": {
			raw:  cat([]byte{2, 0, 0, MaxEncodings}, sixtyFourRaw),
			want: SetEncodings{Encodings: sixtyFour},
		},
		"FramebufferUpdateRequest incremental": {
			raw:  []byte{3, 1, 0, 1, 0, 2, 2, 128, 1, 224},
			want: FramebufferUpdateRequest{Incremental: true, X: 1, Y: 2, Width: 640, Height: 480},
		},
		"FramebufferUpdateRequest full": {
			raw:  []byte{3, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF},
			want: FramebufferUpdateRequest{Width: 0xFFFF, Height: 0xFFFF},
		},
		"KeyEvent down": {
			raw:  []byte{4, 1, 0, 0, 0, 0, 0xFF, 0x0D},
			want: KeyEvent{Down: true, Key: 0xFF0D},
		},
		"KeyEvent up": {
			raw:  []byte{4, 0, 0, 0, 0, 0, 0, 'a'},
			want: KeyEvent{Key: 'a'},
		},
		"PointerEvent": {
			raw:  []byte{5, 0x05, 0x01, 0x00, 0x00, 0x20},
			want: PointerEvent{Buttons: 5, X: 256, Y: 32},
		},
		"PointerEvent button 8 without the extension": {
			raw:  []byte{5, 0x80, 0, 1, 0, 2},
			want: PointerEvent{Buttons: 0x80, X: 1, Y: 2},
		},
		"ClientCutText": {
			raw:  cat([]byte{6, 0, 0, 0}, be32(5), []byte("hello")),
			want: ClientCutText{Text: []byte("hello")},
		},
		"ClientCutText empty": {
			raw:  cat([]byte{6, 0, 0, 0}, be32(0)),
			want: ClientCutText{Text: []byte{}},
		},
		"ClientCutText extended": {
			raw:  cat([]byte{6, 0, 0, 0}, be32(uint32(0x100000000-9)), be32(0x10000001), []byte("zdata")),
			want: ClientCutText{Extended: true, Flags: 0x10000001, Text: []byte("zdata")},
		},
		"ClientCutText extended flags only": {
			raw:  cat([]byte{6, 0, 0, 0}, be32(uint32(0x100000000-4)), be32(0x01000000)),
			want: ClientCutText{Extended: true, Flags: 0x01000000, Text: []byte{}},
		},
		"EnableContinuousUpdates": {
			raw:  []byte{150, 1, 0, 0, 0, 0, 0x04, 0x00, 0x03, 0x00},
			want: EnableContinuousUpdates{Enable: true, Width: 1024, Height: 768},
		},
		"ClientFence": {
			raw:  cat([]byte{248, 0, 0, 0}, be32(0x80000003), []byte{3, 'a', 'b', 'c'}),
			want: ClientFence{Flags: 0x80000003, Payload: []byte("abc")},
		},
		"ClientFence at MaxFencePayload": {
			raw:  cat([]byte{248, 0, 0, 0}, be32(1), []byte{MaxFencePayload}, filled(MaxFencePayload, 'f')),
			want: ClientFence{Flags: 1, Payload: filled(MaxFencePayload, 'f')},
		},
		"xvp": {
			raw:  []byte{250, 0, 1, 4},
			want: XVP{Version: 1, Code: 4},
		},
		"SetDesktopSize": {
			raw:  cat([]byte{251, 0}, be16(1920), be16(1080), []byte{1, 0}, be32(7), be16(0), be16(0), be16(1920), be16(1080), be32(0)),
			want: SetDesktopSize{Width: 1920, Height: 1080, Screens: []Screen{{ID: 7, Width: 1920, Height: 1080}}},
		},
		"SetDesktopSize at MaxScreens": {
			raw:  cat([]byte{251, 0}, be16(800), be16(600), []byte{MaxScreens, 0}, sixteenRaw),
			want: SetDesktopSize{Width: 800, Height: 600, Screens: sixteen},
		},
		"QEMU extended key event": {
			raw:  cat([]byte{255, 0}, be16(1), be32('a'), be32(0x1E)),
			want: QEMUExtendedKeyEvent{Down: true, Keysym: 'a', Keycode: 0x1E},
		},
		"QEMU audio enable": {
			raw:  cat([]byte{255, 1}, be16(0)),
			want: QEMUAudio{Operation: QEMUAudioEnable},
		},
		"QEMU audio disable": {
			raw:  cat([]byte{255, 1}, be16(1)),
			want: QEMUAudio{Operation: QEMUAudioDisable},
		},
		"QEMU audio set format": {
			raw:  cat([]byte{255, 1}, be16(2), []byte{3, 2}, be32(44100)),
			want: QEMUAudio{Operation: QEMUAudioSetFormat, SampleFormat: 3, Channels: 2, Frequency: 44100},
		},
	}
}

func TestClientMessages(t *testing.T) {
	for name, tc := range clientMessages() {
		t.Run(name, func(t *testing.T) {
			newParser := func() *ClientParser { return newNormalClientParser(nil) }
			checkClientSplits(t, newParser, tc.raw, []Message{{Raw: tc.raw, Body: tc.want}}, nil)
			again, err := tc.want.AppendBinary(nil)
			if err != nil || !bytes.Equal(again, tc.raw) {
				t.Fatalf("AppendBinary = %x, %v; want the raw bytes %x", again, err, tc.raw)
			}
		})
	}
}

// TestClientMessageStream parses every message back to back, so each
// split also lands between messages and inside the next one's header.
func TestClientMessageStream(t *testing.T) {
	cases := clientMessages()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cases {
			if !yield(n) {
				return
			}
		}
	})
	var in []byte
	var want []Message
	for _, n := range names {
		in = append(in, cases[n].raw...)
		want = append(want, Message{Raw: cases[n].raw, Body: cases[n].want})
	}
	checkClientSplits(t, func() *ClientParser { return newNormalClientParser(nil) }, in, want, nil)
}

func TestExtendedPointerEvent(t *testing.T) {
	ext := []byte{5, 0x81, 0, 10, 0, 20, 0x03} // marker, button 1, buttons 8 and 9
	plain := []byte{5, 0x01, 0, 10, 0, 20}     // marker clear: 6 bytes even with the extension
	cases := map[string]struct {
		requested, confirmed bool
		in                   []byte
		want                 []Message
	}{
		"requested and confirmed: marker means 7 bytes": {
			requested: true, confirmed: true,
			in: cat(ext, plain),
			want: []Message{
				{Raw: ext, Body: PointerEvent{Buttons: 0x181, X: 10, Y: 20, Extended: true}},
				{Raw: plain, Body: PointerEvent{Buttons: 1, X: 10, Y: 20}},
			},
		},
		"requested, not confirmed: bit 7 is button 8": {
			requested: true,
			in:        cat(ext[:6], plain),
			want: []Message{
				{Raw: ext[:6], Body: PointerEvent{Buttons: 0x81, X: 10, Y: 20}},
				{Raw: plain, Body: PointerEvent{Buttons: 1, X: 10, Y: 20}},
			},
		},
		"confirmed, but the latest SetEncodings dropped it": {
			confirmed: true,
			in:        cat(ext[:6], plain),
			want: []Message{
				{Raw: ext[:6], Body: PointerEvent{Buttons: 0x81, X: 10, Y: 20}},
				{Raw: plain, Body: PointerEvent{Buttons: 1, X: 10, Y: 20}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			newParser := func() *ClientParser {
				s := NewSession()
				if tc.requested {
					s.setEncodings([]int32{EncodingExtendedMouseButtons})
				}
				if tc.confirmed {
					s.confirmExtendedMouseButtons()
				}
				return newNormalClientParser(s)
			}
			checkClientSplits(t, newParser, tc.in, tc.want, nil)
			for _, m := range tc.want {
				if again, err := m.Body.AppendBinary(nil); err != nil || !bytes.Equal(again, m.Raw) {
					t.Errorf("%+v encodes to %x, %v; want %x", m.Body, again, err, m.Raw)
				}
			}
		})
	}
}

// TestExtendedPointerEventNegotiation runs the negotiation through both
// parsers: the client's SetEncodings, then the server's confirmation.
func TestExtendedPointerEventNegotiation(t *testing.T) {
	s := NewSession()
	p := newNormalClientParser(s)
	tr := newNormalTracker(s, pf32)
	setEnc := cat([]byte{2, 0, 0, 1}, s32(EncodingExtendedMouseButtons))
	ext := []byte{5, 0x80, 0, 1, 0, 1, 0x01}
	if got := feedClient(p, [][]byte{setEnc, ext[:6]}); got.err != nil || len(got.msgs) != 2 {
		t.Fatalf("before the confirmation: %+v", got)
	}
	if _, err := trackServer(tr, [][]byte{update(1, rectBytes(0, 0, 0, 0, EncodingExtendedMouseButtons))}); err != nil {
		t.Fatal(err)
	}
	got := feedClient(p, [][]byte{ext})
	want := []Message{{Raw: ext, Body: PointerEvent{Buttons: 0x80, X: 1, Y: 1, Extended: true}}}
	if got.err != nil || !reflect.DeepEqual(got.msgs, want) {
		t.Fatalf("after the confirmation: %+v, want %+v", got, want)
	}
}

func TestClientErrors(t *testing.T) {
	fbur := []byte{3, 1, 0, 0, 0, 0, 0, 10, 0, 10}
	cases := map[string]struct {
		in      []byte
		wantErr error
	}{
		"unknown message type": {
			in:      []byte{7, 0, 0, 0},
			wantErr: &ProtocolError{Message: "client message type 7", Detail: "unknown message type; the stream cannot be followed past it"},
		},
		"unknown message type 252 (tight)": {
			in:      []byte{252},
			wantErr: &ProtocolError{Message: "client message type 252", Detail: "unknown message type; the stream cannot be followed past it"},
		},
		"too many encodings": {
			in:      []byte{2, 0, 0, MaxEncodings + 1},
			wantErr: &LimitError{Message: "SetEncodings", Field: "number-of-encodings", Value: MaxEncodings + 1, Cap: "MaxEncodings", Limit: MaxEncodings},
		},
		"65535 encodings": {
			in:      []byte{2, 0, 0xFF, 0xFF},
			wantErr: &LimitError{Message: "SetEncodings", Field: "number-of-encodings", Value: 65535, Cap: "MaxEncodings", Limit: MaxEncodings},
		},
		"cut text of 2 GiB": {
			in:      cat([]byte{6, 0, 0, 0}, be32(0x7FFFFFFF)),
			wantErr: &LimitError{Message: "ClientCutText", Field: "length", Value: 0x7FFFFFFF, Cap: "MaxCutTextLength", Limit: MaxCutTextLength},
		},
		"extended cut text of 2 GiB": {
			in:      cat([]byte{6, 0, 0, 0}, be32(0x80000000)),
			wantErr: &LimitError{Message: "ClientCutText", Field: "length", Value: 0x80000000, Cap: "MaxCutTextLength", Limit: MaxCutTextLength},
		},
		"cut text one byte over the cap": {
			in:      cat([]byte{6, 0, 0, 0}, be32(MaxCutTextLength+1)),
			wantErr: &LimitError{Message: "ClientCutText", Field: "length", Value: MaxCutTextLength + 1, Cap: "MaxCutTextLength", Limit: MaxCutTextLength},
		},
		"extended cut text shorter than its flags": {
			in:      cat([]byte{6, 0, 0, 0}, be32(uint32(0x100000000-3))),
			wantErr: &ProtocolError{Message: "ClientCutText", Detail: "extended clipboard payload of 3 bytes is shorter than its 4-byte flags"},
		},
		"fence payload over the cap": {
			in:      cat([]byte{248, 0, 0, 0}, be32(0), []byte{MaxFencePayload + 1}),
			wantErr: &LimitError{Message: "ClientFence", Field: "length", Value: MaxFencePayload + 1, Cap: "MaxFencePayload", Limit: MaxFencePayload},
		},
		"too many screens": {
			in:      cat([]byte{251, 0}, be16(800), be16(600), []byte{MaxScreens + 1, 0}),
			wantErr: &LimitError{Message: "SetDesktopSize", Field: "number-of-screens", Value: MaxScreens + 1, Cap: "MaxScreens", Limit: MaxScreens},
		},
		"unknown QEMU submessage": {
			in:      []byte{255, 2},
			wantErr: &ProtocolError{Message: "QEMU client message", Detail: "unknown submessage type 2"},
		},
		"unknown QEMU audio operation": {
			in:      cat([]byte{255, 1}, be16(3)),
			wantErr: &ProtocolError{Message: "QEMUAudio", Detail: "unknown operation 3"},
		},
		"24 bits per pixel": {
			in:      cat([]byte{0, 0, 0, 0}, []byte{24, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}),
			wantErr: &ProtocolError{Message: "SetPixelFormat", Detail: "bits-per-pixel 24 is not 8, 16 or 32"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A good message first: it must come out before the error.
			in := cat(fbur, tc.in)
			want := []Message{{Raw: fbur, Body: FramebufferUpdateRequest{Incremental: true, Width: 10, Height: 10}}}
			checkClientSplits(t, func() *ClientParser { return newNormalClientParser(nil) }, in, want, tc.wantErr)
			if !errors.Is(tc.wantErr, ErrProtocol) {
				t.Errorf("%v does not wrap ErrProtocol", tc.wantErr)
			}
			// The error sticks, and the parser says it has failed.
			p := newNormalClientParser(nil)
			first := p.Feed(in, nil)
			if again := p.Feed(fbur, func(Message) error { t.Fatal("emitted after an error"); return nil }); !errors.Is(again, first) || p.Phase() != PhaseFailed {
				t.Errorf("after %v: Feed = %v, phase %v", first, again, p.Phase())
			}
		})
	}
}

// TestCapsRefuseBeforeAllocating feeds headers that announce big bodies and
// measures what the parser allocates: only the error, never the body. (The
// least of several runs, because the runtime allocates in the background.)
func TestCapsRefuseBeforeAllocating(t *testing.T) {
	headers := map[string][]byte{
		"cut text of 2 GiB":          cat([]byte{6, 0, 0, 0}, be32(0x7FFFFFFF)),
		"extended cut text of 2 GiB": cat([]byte{6, 0, 0, 0}, be32(0x80000000)),
		"65535 encodings":            []byte{2, 0, 0xFF, 0xFF},
		"255 screens":                cat([]byte{251, 0}, be16(1), be16(1), []byte{255, 0}),
		"255-byte fence":             cat([]byte{248, 0, 0, 0}, be32(0), []byte{255}),
	}
	for name, h := range headers {
		t.Run(name, func(t *testing.T) {
			for _, byteByByte := range []bool{false, true} {
				least := uint64(1 << 62)
				for range 10 {
					var before, after runtime.MemStats
					p := newNormalClientParser(nil)
					runtime.ReadMemStats(&before)
					var err error
					if byteByByte {
						for i := range h {
							if err = p.Feed(h[i:i+1], nil); err != nil {
								break
							}
						}
					} else {
						err = p.Feed(h, nil)
					}
					runtime.ReadMemStats(&after)
					if err == nil {
						t.Fatal("no error")
					}
					least = min(least, after.TotalAlloc-before.TotalAlloc)
				}
				if least > 256 {
					t.Errorf("byte by byte %t: %d bytes allocated to refuse the header", byteByByte, least)
				}
			}
		})
	}
}

// TestLargeCutText: a cut text at the cap passes, and the buffer that held
// it is not kept.
func TestLargeCutText(t *testing.T) {
	text := bytes.Repeat([]byte("0123456789abcdef"), MaxCutTextLength/16)
	in := cat([]byte{6, 0, 0, 0}, be32(MaxCutTextLength), text, []byte{2}) // and the start of the next message
	for _, chunk := range []int{1 << 20, 4096, 1000, 7} {
		p := newNormalClientParser(nil)
		var got []Message
		var rest = in
		for len(rest) > 0 {
			n := min(chunk, len(rest))
			if err := p.Feed(rest[:n], func(m Message) error {
				got = append(got, Message{Raw: bytes.Clone(m.Raw), Body: cloneBody(m.Body)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if len(got) != 1 || !bytes.Equal(got[0].Body.(ClientCutText).Text, text) {
			t.Fatalf("chunks of %d: %d messages", chunk, len(got))
		}
		if p.Buffered() != 1 || cap(p.buf) > keepBuffer {
			t.Errorf("chunks of %d: after the message, %d bytes buffered in a %d-byte buffer", chunk, p.Buffered(), cap(p.buf))
		}
	}
}

func TestEmitErrorStops(t *testing.T) {
	stop := errors.New("write failed")
	p := newNormalClientParser(nil)
	in := cat([]byte{4, 1, 0, 0, 0, 0, 0, 'a'}, []byte{4, 0, 0, 0, 0, 0, 0, 'a'})
	calls := 0
	err := p.Feed(in, func(Message) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Feed = %v after %d calls, want %v after 1", err, calls, stop)
	}
	if errors.Is(err, ErrProtocol) {
		t.Error("an emit error is not a protocol error")
	}
}

func TestEncodeHelpers(t *testing.T) {
	got, err := EncodeSetEncodings([]int32{EncodingTight, EncodingCompressLevel0 + 9})
	if want := cat([]byte{2, 0, 0, 2}, be32(7), be32(uint32(0x100000000-247))); err != nil || !bytes.Equal(got, want) {
		t.Errorf("EncodeSetEncodings = %x, %v; want %x", got, err, want)
	}
	_, err = EncodeSetEncodings(make([]int32, MaxEncodings+1))
	want := &LimitError{Message: "SetEncodings", Field: "number-of-encodings", Value: MaxEncodings + 1, Cap: "MaxEncodings", Limit: MaxEncodings}
	if !reflect.DeepEqual(err, want) {
		t.Errorf("65 encodings: %v, want %v", err, want)
	}
	if got, want := EncodeFramebufferUpdateRequest(false, 0, 0, 720, 400), []byte{3, 0, 0, 0, 0, 0, 2, 208, 1, 144}; !bytes.Equal(got, want) {
		t.Errorf("EncodeFramebufferUpdateRequest = %x, want %x", got, want)
	}
}

func TestAppendBinaryRefusesWhatTheParserWould(t *testing.T) {
	cases := map[string]struct {
		body Body
		want error
	}{
		"cut text over the cap": {
			body: ClientCutText{Text: make([]byte, MaxCutTextLength+1)},
			want: &LimitError{Message: "ClientCutText", Field: "length", Value: MaxCutTextLength + 1, Cap: "MaxCutTextLength", Limit: MaxCutTextLength},
		},
		"extended cut text over the cap with its flags": {
			body: ClientCutText{Extended: true, Text: make([]byte, MaxCutTextLength-3)},
			want: &LimitError{Message: "ClientCutText", Field: "length", Value: MaxCutTextLength + 1, Cap: "MaxCutTextLength", Limit: MaxCutTextLength},
		},
		"fence over the cap": {
			body: ClientFence{Payload: make([]byte, MaxFencePayload+1)},
			want: &LimitError{Message: "ClientFence", Field: "length", Value: MaxFencePayload + 1, Cap: "MaxFencePayload", Limit: MaxFencePayload},
		},
		"too many screens": {
			body: SetDesktopSize{Screens: make([]Screen, MaxScreens+1)},
			want: &LimitError{Message: "SetDesktopSize", Field: "number-of-screens", Value: MaxScreens + 1, Cap: "MaxScreens", Limit: MaxScreens},
		},
		"button 9 in the plain form": {
			body: PointerEvent{Buttons: 0x100},
			want: &ProtocolError{Message: "PointerEvent", Detail: "button mask 0x100 needs the extended form"},
		},
		"button 16": {
			body: PointerEvent{Buttons: 0x8000, Extended: true},
			want: &ProtocolError{Message: "PointerEvent", Detail: "button mask 0x8000 has bits above button 15"},
		},
		"24 bits per pixel": {
			body: SetPixelFormat{Format: PixelFormat{BitsPerPixel: 24}},
			want: &ProtocolError{Message: "SetPixelFormat", Detail: "bits-per-pixel 24 is not 8, 16 or 32"},
		},
		"unknown audio operation": {
			body: QEMUAudio{Operation: 9},
			want: &ProtocolError{Message: "QEMUAudio", Detail: "unknown operation 9"},
		},
		"version 1000.0": {
			body: ProtocolVersion{Major: 1000},
			want: &ProtocolError{Message: "ProtocolVersion", Detail: "version 1000.0 does not fit xxx.yyy"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := tc.body.AppendBinary([]byte("x"))
			if !reflect.DeepEqual(err, tc.want) || string(b) != "x" {
				t.Errorf("AppendBinary = %q, %v; want %q, %v", b, err, "x", tc.want)
			}
		})
	}
}
