package rfb

import (
	"errors"
	"reflect"
	"testing"
)

// hextileTileBytes builds one Hextile tile of tw x th pixels with the given
// subencoding mask and, when it has subrectangles, n of them.
func hextileTileBytes(mask byte, tw, th, bpp, n int) []byte {
	if mask&0x01 != 0 {
		return cat([]byte{mask}, filled(tw*th*bpp, 0xAA))
	}
	b := []byte{mask}
	if mask&0x02 != 0 {
		b = append(b, filled(bpp, 0xB0)...)
	}
	if mask&0x04 != 0 {
		b = append(b, filled(bpp, 0xF0)...)
	}
	if mask&0x08 != 0 {
		b = append(b, byte(n))
		for i := range n {
			if mask&0x10 != 0 {
				b = append(b, filled(bpp, 0xC0)...)
			}
			b = append(b, byte(i), 0x00) // x,y then w-1,h-1
		}
	}
	return b
}

// compact is a Tight compact length.
func compact(n int) []byte {
	switch {
	case n < 1<<7:
		return []byte{byte(n)}
	case n < 1<<14:
		return []byte{byte(n) | 0x80, byte(n >> 7)}
	}
	return []byte{byte(n) | 0x80, byte(n>>7) | 0x80, byte(n >> 14)}
}

// rectCase is one rectangle: its bytes and the Rect the tracker reports.
type rectCase struct {
	pf   PixelFormat
	rect []byte
	want Rect
}

func rc(pf PixelFormat, x, y, w, h uint16, enc int32, tight TightCompression, payload ...[]byte) rectCase {
	b := rectBytes(x, y, w, h, enc, payload...)
	return rectCase{pf: pf, rect: b, want: Rect{X: x, Y: y, Width: w, Height: h, Encoding: enc, Tight: tight, Bytes: int64(len(b))}}
}

func rectCases() map[string]rectCase {
	cases := map[string]rectCase{
		"Raw 32-bit":                    rc(pf32, 1, 2, 3, 2, EncodingRaw, TightNone, filled(3*2*4, 1)),
		"Raw 16-bit":                    rc(pf16, 0, 0, 3, 3, EncodingRaw, TightNone, filled(3*3*2, 1)),
		"Raw 8-bit":                     rc(pf8, 0, 0, 5, 1, EncodingRaw, TightNone, filled(5, 1)),
		"Raw empty":                     rc(pf32, 9, 9, 0, 0, EncodingRaw, TightNone),
		"CopyRect":                      rc(pf32, 10, 10, 100, 100, EncodingCopyRect, TightNone, be16(0), be16(5)),
		"RRE 32-bit":                    rc(pf32, 0, 0, 50, 50, EncodingRRE, TightNone, be32(2), filled(4, 0), filled(2*(4+8), 3)),
		"RRE 16-bit, no subrectangles":  rc(pf16, 0, 0, 50, 50, EncodingRRE, TightNone, be32(0), filled(2, 0)),
		"CoRRE 8-bit":                   rc(pf8, 0, 0, 50, 50, EncodingCoRRE, TightNone, be32(3), filled(1, 0), filled(3*(1+4), 3)),
		"zlib":                          rc(pf32, 0, 0, 64, 64, EncodingZlib, TightNone, be32(5), []byte("zzzzz")),
		"ZRLE":                          rc(pf32, 0, 0, 64, 64, EncodingZRLE, TightNone, be32(7), []byte("zrledat")),
		"ZRLE empty":                    rc(pf32, 0, 0, 64, 64, EncodingZRLE, TightNone, be32(0)),
		"ZYWRLE":                        rc(pf16, 0, 0, 64, 64, EncodingZYWRLE, TightNone, be32(3), []byte("zyw")),
		"Tight fill 32-bit is 3 bytes":  rc(pf32, 0, 0, 640, 480, EncodingTight, TightFill, []byte{0x80}, []byte{1, 2, 3}),
		"Tight fill resetting streams":  rc(pf32, 0, 0, 640, 480, EncodingTight, TightFill, []byte{0x8F}, []byte{1, 2, 3}),
		"Tight fill 16-bit is 2 bytes":  rc(pf16, 0, 0, 640, 480, EncodingTight, TightFill, []byte{0x80}, []byte{1, 2}),
		"Tight fill 32-bit depth 32":    rc(PixelFormat{BitsPerPixel: 32, Depth: 32, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255}, 0, 0, 1, 1, EncodingTight, TightFill, []byte{0x80}, []byte{1, 2, 3, 4}),
		"Tight JPEG, 1-byte length":     rc(pf32, 0, 0, 64, 64, EncodingTight, TightJPEG, []byte{0x90}, compact(100), filled(100, 0xFF)),
		"Tight JPEG, 2-byte length":     rc(pf32, 0, 0, 64, 64, EncodingTight, TightJPEG, []byte{0x90}, []byte{0x90, 0x4E}, filled(10000, 0xFF)),
		"Tight JPEG, 3-byte length":     rc(pf32, 0, 0, 640, 480, EncodingTight, TightJPEG, []byte{0x90}, compact(20000), filled(20000, 0xFF)),
		"Tight JPEG, 3-byte maximum":    rc(pf32, 0, 0, 2048, 2048, EncodingTight, TightJPEG, []byte{0x90}, []byte{0xFF, 0xFF, 0xFF}, filled(4194303, 0xFF)),
		"Tight basic, raw below 12":     rc(pf32, 0, 0, 3, 1, EncodingTight, TightBasic, []byte{0x00}, filled(9, 7)),
		"Tight basic, compressed":       rc(pf32, 0, 0, 4, 1, EncodingTight, TightBasic, []byte{0x10}, compact(5), filled(5, 7)),
		"Tight basic, 2-byte length":    rc(pf32, 0, 0, 100, 100, EncodingTight, TightBasic, []byte{0x20}, compact(300), filled(300, 7)),
		"Tight basic 16-bit, raw":       rc(pf16, 0, 0, 5, 1, EncodingTight, TightBasic, []byte{0x30}, filled(10, 7)),
		"Tight basic 16-bit, 12 bytes":  rc(pf16, 0, 0, 6, 1, EncodingTight, TightBasic, []byte{0x30}, compact(3), filled(3, 7)),
		"Tight copy filter":             rc(pf32, 0, 0, 2, 1, EncodingTight, TightBasic, []byte{0x40, 0}, filled(6, 7)),
		"Tight gradient filter":         rc(pf32, 0, 0, 8, 8, EncodingTight, TightBasic, []byte{0x41, 2}, compact(40), filled(40, 7)),
		"Tight palette of 2, raw":       rc(pf32, 0, 0, 9, 5, EncodingTight, TightBasic, []byte{0x40, 1, 1}, filled(2*3, 9), filled(2*5, 1)),
		"Tight palette of 2, zlib":      rc(pf32, 0, 0, 9, 6, EncodingTight, TightBasic, []byte{0x50, 1, 1}, filled(2*3, 9), compact(4), filled(4, 1)),
		"Tight palette of 5, raw":       rc(pf32, 0, 0, 11, 1, EncodingTight, TightBasic, []byte{0x60, 1, 4}, filled(5*3, 9), filled(11, 1)),
		"Tight palette of 5, zlib":      rc(pf32, 0, 0, 4, 3, EncodingTight, TightBasic, []byte{0x70, 1, 4}, filled(5*3, 9), compact(2), filled(2, 1)),
		"Tight palette of 256 16-bit":   rc(pf16, 0, 0, 64, 64, EncodingTight, TightBasic, []byte{0x40, 1, 255}, filled(256*2, 9), compact(200), filled(200, 1)),
		"TightPNG fill":                 rc(pf32, 0, 0, 8, 8, EncodingTightPNG, TightFill, []byte{0x80}, []byte{1, 2, 3}),
		"TightPNG png":                  rc(pf32, 0, 0, 8, 8, EncodingTightPNG, TightPNG, []byte{0xA0}, compact(130), filled(130, 0x89)),
		"TightPNG jpeg":                 rc(pf32, 0, 0, 8, 8, EncodingTightPNG, TightJPEG, []byte{0x90}, compact(3), filled(3, 0xFF)),
		"Cursor 32-bit":                 rc(pf32, 3, 4, 5, 3, EncodingCursor, TightNone, filled(5*3*4, 1), filled(1*3, 0xF8)),
		"Cursor 16-bit, 9 wide":         rc(pf16, 0, 0, 9, 2, EncodingCursor, TightNone, filled(9*2*2, 1), filled(2*2, 0xFF)),
		"Cursor empty":                  rc(pf32, 0, 0, 0, 0, EncodingCursor, TightNone),
		"X cursor":                      rc(pf32, 0, 0, 9, 2, EncodingXCursor, TightNone, filled(6, 0), filled(2*2, 1), filled(2*2, 2)),
		"X cursor empty":                rc(pf32, 0, 0, 0, 0, EncodingXCursor, TightNone),
		"cursor with alpha":             rc(pf16, 1, 1, 4, 2, EncodingCursorWithAlpha, TightNone, s32(EncodingRaw), filled(4*2*4, 1)),
		"DesktopSize":                   rc(pf32, 0, 0, 1024, 768, EncodingDesktopSize, TightNone),
		"ExtendedDesktopSize":           rc(pf32, 0, 0, 1024, 768, EncodingExtendedDesktopSize, TightNone, []byte{2, 0, 0, 0}, filled(32, 0)),
		"ExtendedDesktopSize refused":   rc(pf32, 1, 3, 1024, 768, EncodingExtendedDesktopSize, TightNone, []byte{1, 0, 0, 0}, filled(16, 0)),
		"DesktopName":                   rc(pf32, 0, 0, 0, 0, EncodingDesktopName, TightNone, be32(3), []byte("vm1")),
		"QEMU LED state":                rc(pf32, 0, 0, 0, 0, EncodingQEMULEDState, TightNone, []byte{0x04}),
		"QEMU extended key event ack":   rc(pf32, 0, 0, 720, 400, EncodingQEMUExtendedKeyEvent, TightNone),
		"QEMU audio ack":                rc(pf32, 0, 0, 720, 400, EncodingQEMUAudio, TightNone),
		"pointer type change":           rc(pf32, 1, 0, 720, 400, EncodingPointerTypeChange, TightNone),
		"pointer position":              rc(pf32, 10, 20, 0, 0, EncodingPointerPos, TightNone),
		"ExtendedMouseButtons ack":      rc(pf32, 0, 0, 0, 0, EncodingExtendedMouseButtons, TightNone),
		"WMVi to 16-bit":                rc(pf32, 0, 0, 720, 400, EncodingWMVi, TightNone, pixelFormatBytes(pf16)),
		"Hextile 16-bit, partial tiles": rc(pf16, 0, 0, 20, 18, EncodingHextile, TightNone, hextileTileBytes(0x0E, 16, 16, 2, 3), hextileTileBytes(0x01, 4, 16, 2, 0), hextileTileBytes(0x08, 16, 2, 2, 1), hextileTileBytes(0x1A, 4, 2, 2, 2)),
		"Hextile empty":                 rc(pf32, 0, 0, 0, 7, EncodingHextile, TightNone),
	}
	// Every subencoding mask, one tile each, in one 16-pixel-high strip;
	// at 32 and 8 bits per pixel.
	for _, pf := range []PixelFormat{pf32, pf8} {
		var tiles [][]byte
		for m := range 32 {
			tiles = append(tiles, hextileTileBytes(byte(m), 16, 16, pf.BytesPerPixel(), m%5))
		}
		cases["Hextile, every subencoding, "+map[uint8]string{32: "32-bit", 8: "8-bit"}[pf.BitsPerPixel]] = rc(pf, 0, 0, 32*16, 16, EncodingHextile, TightNone, tiles...)
	}
	return cases
}

// bell is a whole message after an update: the tracker must be back at a
// message boundary.
var bell = []byte{2}

func TestServerRects(t *testing.T) {
	for name, tc := range rectCases() {
		t.Run(name, func(t *testing.T) {
			in := cat(update(1, tc.rect), bell)
			want := []Event{
				{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: 1},
				{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: tc.want},
				{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Rects: 1, Bytes: int64(4 + len(tc.rect))},
				{Kind: EventMessage, Type: MsgBell, Bytes: 1},
			}
			checkServerSplits(t, tc.pf, in, want, nil)
		})
	}
}

// checkServerSplits tracks in for every way of splitting it.
func checkServerSplits(t *testing.T, pf PixelFormat, in []byte, want []Event, wantErr error) {
	t.Helper()
	var ways [][][]byte
	if len(in) <= 4096 {
		ways = splits(in)
	} else {
		// A long skip is the same loop whatever its length: cut near both
		// ends at every offset, and in the middle in big chunks.
		ways = [][][]byte{{in}}
		for k := 1; k < 64; k++ {
			ways = append(ways, [][]byte{in[:k], in[k:]}, [][]byte{in[:len(in)-k], in[len(in)-k:]})
		}
		for _, n := range []int{1000, 4093} {
			var chunks [][]byte
			for rest := in; len(rest) > 0; {
				k := min(n, len(rest))
				chunks, rest = append(chunks, rest[:k]), rest[k:]
			}
			ways = append(ways, chunks)
		}
	}
	for _, chunks := range ways {
		got, err := trackServer(newNormalTracker(nil, pf), chunks)
		if !reflect.DeepEqual(err, wantErr) {
			t.Fatalf("split %v: error %v, want %v", chunkLens(chunks), err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split %v: events\n%+v\nwant\n%+v", chunkLens(chunks), got, want)
		}
	}
}

// TestServerUpdateStream tracks every rectangle case in one update, then
// each in its own update, back to back with other messages between.
func TestServerUpdateStream(t *testing.T) {
	var rects [][]byte
	var wantRects []Event
	total := 4
	for _, tc := range rectCases() {
		if tc.pf != pf32 || tc.want.Encoding == EncodingWMVi || len(tc.rect) > 1024 {
			continue // one pixel format for the whole update, and short enough to cut everywhere
		}
		rects = append(rects, tc.rect)
		wantRects = append(wantRects, Event{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: tc.want})
		total += len(tc.rect)
	}
	others := cat(
		[]byte{1, 0}, be16(0), be16(2), filled(12, 0), // SetColourMapEntries, 2 colours
		[]byte{3, 0, 0, 0}, be32(5), []byte("hello"), // ServerCutText
		[]byte{3, 0, 0, 0}, be32(uint32(0x100000000-8)), be32(0x10000000), []byte("data"), // extended
		[]byte{150},                                                      // EndOfContinuousUpdates
		[]byte{248, 0, 0, 0}, be32(0x80000001), []byte{3, 'a', 'b', 'c'}, // ServerFence
		[]byte{250, 0, 1, 1},    // xvp INIT
		[]byte{255, 1}, be16(1), // QEMU audio begin
		[]byte{255, 1}, be16(2), be32(6), filled(6, 0x55), // data
		[]byte{255, 1}, be16(0), // end
	)
	wantOthers := []Event{
		{Kind: EventMessage, Type: MsgSetColourMapEntries, Bytes: 18},
		{Kind: EventMessage, Type: MsgServerCutText, Bytes: 13},
		{Kind: EventMessage, Type: MsgServerCutText, Bytes: 16},
		{Kind: EventMessage, Type: MsgEndOfContinuousUpdates, Bytes: 1},
		{Kind: EventMessage, Type: MsgServerFence, Bytes: 12},
		{Kind: EventMessage, Type: MsgServerXVP, Bytes: 4},
		{Kind: EventMessage, Type: MsgServerQEMU, Bytes: 4},
		{Kind: EventMessage, Type: MsgServerQEMU, Bytes: 14},
		{Kind: EventMessage, Type: MsgServerQEMU, Bytes: 4},
	}
	in := cat(update(uint16(len(rects)), rects...), others, update(0), update(0xFFFF, cat(rects[0], rectBytes(0, 0, 0, 0, EncodingLastRect))))
	want := []Event{{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: len(rects)}}
	want = append(want, wantRects...)
	want = append(want, Event{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Rects: len(rects), Bytes: int64(total)})
	want = append(want, wantOthers...)
	want = append(want,
		Event{Kind: EventUpdateStart, Type: MsgFramebufferUpdate},
		Event{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Bytes: 4},
		Event{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: 0xFFFF},
		wantRects[0],
		Event{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: Rect{Encoding: EncodingLastRect, Bytes: 12}},
		Event{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Rects: 2, Bytes: int64(4 + len(rects[0]) + 12)},
	)
	checkServerSplits(t, pf32, in, want, nil)
}

func TestServerErrors(t *testing.T) {
	head := func(enc int32, w, h uint16) []byte { return cat(update(1), rectBytes(0, 0, w, h, enc)) }
	cases := map[string]struct {
		in      []byte
		wantErr error
	}{
		"unknown message type": {
			in:      []byte{7},
			wantErr: &ProtocolError{Message: "server message type 7", Detail: "unknown server message type; the stream cannot be framed past it"},
		},
		"unknown encoding": {
			in:      head(15, 1, 1), // TRLE has no length to skip by
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a rectangle in encoding 15, which the tracker cannot frame"},
		},
		"Hextile tile with zlibhex bits": {
			in:      cat(head(EncodingHextile, 16, 16), []byte{0x20}),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a Hextile tile with subencoding 0x20 (bits 5-7 are not Hextile)"},
		},
		"Tight PNG in plain Tight": {
			in:      cat(head(EncodingTight, 16, 16), []byte{0xA0}),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a Tight rectangle with compression control 0xa0"},
		},
		"Tight method 0xB": {
			in:      cat(head(EncodingTightPNG, 16, 16), []byte{0xB0}),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a Tight rectangle with compression control 0xb0"},
		},
		"Tight filter 3": {
			in:      cat(head(EncodingTight, 16, 16), []byte{0x40, 3}),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a Tight rectangle with filter 3"},
		},
		"cursor with alpha in Tight": {
			in:      cat(head(EncodingCursorWithAlpha, 16, 16), s32(EncodingTight)),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a cursor-with-alpha rectangle in encoding 7; the tracker frames only Raw cursors"},
		},
		"WMVi with 24 bits per pixel": {
			in:      cat(head(EncodingWMVi, 0, 0), pixelFormatBytes(PixelFormat{BitsPerPixel: 24})),
			wantErr: &ProtocolError{Message: "FramebufferUpdate", Detail: "a WMVi rectangle with bits-per-pixel 24"},
		},
		"fence over the cap": {
			in:      cat([]byte{248, 0, 0, 0}, be32(0), []byte{65}),
			wantErr: &LimitError{Message: "ServerFence", Field: "length", Value: 65, Cap: "MaxFencePayload", Limit: MaxFencePayload},
		},
		"QEMU submessage 0": {
			in:      []byte{255, 0},
			wantErr: &ProtocolError{Message: "QEMU server message", Detail: "unknown submessage type 0"},
		},
		"QEMU audio operation 3": {
			in:      cat([]byte{255, 1}, be16(3)),
			wantErr: &ProtocolError{Message: "QEMU audio server message", Detail: "unknown operation 3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := []Event{{Kind: EventMessage, Type: MsgBell, Bytes: 1}}
			if tc.in[0] == byte(MsgFramebufferUpdate) {
				want = append(want, Event{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: 1})
			}
			checkServerSplits(t, pf32, cat(bell, tc.in), want, tc.wantErr)
		})
	}
}

func TestServerErrorSticks(t *testing.T) {
	tr := newNormalTracker(nil, pf32)
	first := tr.Feed([]byte{7}, nil)
	if first == nil || !errors.Is(tr.Feed(bell, func(Event) { t.Fatal("event after an error") }), first) || tr.Phase() != PhaseFailed {
		t.Fatalf("Feed = %v, phase %v", first, tr.Phase())
	}
}

// TestPixelFormatFollowsTheClient: SetPixelFormat applies from the next
// FramebufferUpdate, not to one already started.
func TestPixelFormatFollowsTheClient(t *testing.T) {
	s := NewSession()
	p, tr := newNormalClientParser(s), newNormalTracker(s, pf32)
	raw32 := rectBytes(0, 0, 2, 2, EncodingRaw, filled(16, 1))
	raw16 := rectBytes(0, 0, 2, 2, EncodingRaw, filled(8, 1))
	first := update(2, raw32)
	var events []Event
	emit := func(e Event) { events = append(events, e) }
	if err := tr.Feed(first, emit); err != nil { // an update in flight, one of its rects still to come
		t.Fatal(err)
	}
	setPF, _ := SetPixelFormat{Format: pf16}.AppendBinary(nil)
	if err := p.Feed(setPF, nil); err != nil {
		t.Fatal(err)
	}
	if err := tr.Feed(cat(raw32, update(1, raw16)), emit); err != nil {
		t.Fatal(err)
	}
	if got := s.PixelFormat(); got != pf16 {
		t.Errorf("session format %+v, want %+v", got, pf16)
	}
	var ends []int64
	for _, e := range events {
		if e.Kind == EventUpdateEnd {
			ends = append(ends, e.Bytes)
		}
	}
	if want := []int64{4 + 2*28, 4 + 20}; !reflect.DeepEqual(ends, want) {
		t.Errorf("update sizes %v, want %v", ends, want)
	}
}

// TestWMViChangesTheRestOfTheUpdate: rectangles after a WMVi use its format.
func TestWMViChangesTheRestOfTheUpdate(t *testing.T) {
	wmvi := rectBytes(0, 0, 720, 400, EncodingWMVi, pixelFormatBytes(pf16))
	raw := rectBytes(0, 0, 2, 2, EncodingRaw, filled(8, 1))
	want := []Event{
		{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: 2},
		{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: Rect{Width: 720, Height: 400, Encoding: EncodingWMVi, Bytes: 28}},
		{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: Rect{Width: 2, Height: 2, Encoding: EncodingRaw, Bytes: 20}},
		{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Rects: 2, Bytes: 52},
		{Kind: EventMessage, Type: MsgBell, Bytes: 1},
	}
	checkServerSplits(t, pf32, cat(update(2, wmvi, raw), bell), want, nil)
}

func TestFramebufferSizeFollowsResizes(t *testing.T) {
	cases := map[string]struct {
		rect         []byte
		wantW, wantH uint16
	}{
		"DesktopSize":                 {rectBytes(0, 0, 1024, 768, EncodingDesktopSize), 1024, 768},
		"ExtendedDesktopSize":         {rectBytes(0, 0, 800, 600, EncodingExtendedDesktopSize, []byte{1, 0, 0, 0}, filled(16, 0)), 800, 600},
		"ExtendedDesktopSize refused": {rectBytes(1, 3, 800, 600, EncodingExtendedDesktopSize, []byte{1, 0, 0, 0}, filled(16, 0)), 640, 480},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := newNormalTracker(nil, pf32)
			if err := tr.Feed(update(1, tc.rect), nil); err != nil {
				t.Fatal(err)
			}
			if w, h := tr.Session().FramebufferSize(); w != tc.wantW || h != tc.wantH {
				t.Errorf("size %dx%d, want %dx%d", w, h, tc.wantW, tc.wantH)
			}
		})
	}
}
