package rfb

import (
	"bytes"
	"reflect"
	"testing"
)

// chunked cuts in into pieces of n bytes (n >= 1).
func chunked(in []byte, n int) [][]byte {
	var chunks [][]byte
	for len(in) > 0 {
		k := min(n, len(in))
		chunks, in = append(chunks, in[:k]), in[k:]
	}
	return chunks
}

// fuzzClientParser builds the parser a FuzzClientParser mode starts with.
func fuzzClientParser(mode uint8) *ClientParser {
	s := NewSession()
	switch mode % 4 {
	case 0: // past the handshake
		return newNormalClientParser(s)
	case 1: // past the handshake, ExtendedMouseButtons negotiated
		s.setEncodings([]int32{EncodingExtendedMouseButtons})
		s.confirmExtendedMouseButtons()
		return newNormalClientParser(s)
	case 2: // from the start; a 3.3 server would impose VNC authentication
		s.setServerVersion(ProtocolVersion{3, 8})
		s.setSecurity(SecurityVNCAuth)
	case 3: // from the start; a 3.3 server would impose None
		s.setServerVersion(ProtocolVersion{3, 8})
		s.setSecurity(SecurityNone)
	}
	return NewClientParser(s)
}

// FuzzClientParser feeds arbitrary bytes to a ClientParser, whole, in
// chunks and byte by byte. It must not panic; all three must agree; the
// emitted messages' raw bytes must be exactly the input consumed, in
// order; each body must encode back to a message of the same length that
// parses to the same body; and the buffer must stay within the caps and
// within what arrived.
func FuzzClientParser(f *testing.F) {
	var stream []byte
	for _, tc := range clientMessages() {
		stream = append(stream, tc.raw...)
		f.Add(tc.raw, uint8(0), uint8(3))
	}
	f.Add(stream, uint8(0), uint8(5))
	f.Add(cat(v38, []byte{1, 1}, stream), uint8(3), uint8(1))
	f.Add(cat(v33, response, []byte{0}, stream), uint8(2), uint8(7))
	f.Add(cat(v37, []byte{2}, response, []byte{1}), uint8(2), uint8(2))
	f.Add([]byte{5, 0x81, 0, 10, 0, 20, 0x03, 5, 1, 0, 0, 0, 0}, uint8(1), uint8(2))
	f.Add(cat([]byte{6, 0, 0, 0}, be32(0x80000000)), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, mode, chunk uint8) {
		var results []parsed
		var parsers []*ClientParser
		for _, chunks := range [][][]byte{{data}, chunked(data, 1+int(chunk%16)), chunked(data, 1)} {
			p := fuzzClientParser(mode)
			results = append(results, feedClient(p, chunks))
			parsers = append(parsers, p)
			if p.Buffered() > 8+MaxCutTextLength || cap(p.buf) > max(64, 2*len(data)) {
				t.Fatalf("%d bytes buffered in a %d-byte buffer after %d bytes of input", p.Buffered(), cap(p.buf), len(data))
			}
		}
		for i := 1; i < len(results); i++ {
			if !reflect.DeepEqual(results[i], results[0]) {
				t.Fatalf("feeding %d differs from feeding whole:\n%+v\n%+v", i, results[i], results[0])
			}
		}
		got := results[0]
		var raws []byte
		for _, m := range got.msgs {
			raws = append(raws, m.Raw...)
		}
		if !bytes.HasPrefix(data, raws) {
			t.Fatalf("the messages' raw bytes are not the start of the input")
		}
		if got.err == nil && len(raws)+parsers[0].Buffered() != len(data) {
			t.Fatalf("%d bytes in messages and %d buffered, of %d", len(raws), parsers[0].Buffered(), len(data))
		}
		for _, m := range got.msgs {
			checkReencode(t, m)
		}
	})
}

// checkReencode encodes a parsed body and parses the result again.
func checkReencode(t *testing.T, m Message) {
	t.Helper()
	enc, err := m.Body.AppendBinary(nil)
	if err != nil || len(enc) != len(m.Raw) {
		t.Fatalf("%s %x encodes to %x, %v", m.Body.Name(), m.Raw, enc, err)
	}
	if _, ok := m.Body.(ProtocolVersion); ok {
		if !bytes.Equal(enc, m.Raw) {
			t.Fatalf("version %q encodes to %q", m.Raw, enc)
		}
		return
	}
	switch m.Body.(type) {
	case SecurityChoice, VNCAuthResponse, ClientInit:
		return // handshake bytes: no header to re-check
	}
	s := NewSession()
	if pe, ok := m.Body.(PointerEvent); ok && pe.Extended {
		s.setEncodings([]int32{EncodingExtendedMouseButtons})
		s.confirmExtendedMouseButtons()
	}
	again := feedClient(newNormalClientParser(s), [][]byte{enc})
	if again.err != nil || len(again.msgs) != 1 || !reflect.DeepEqual(again.msgs[0].Body, cloneBody(m.Body)) {
		t.Fatalf("%s %x encodes to %x, which parses to %+v", m.Body.Name(), m.Raw, enc, again)
	}
}

// FuzzServerHandshake feeds arbitrary bytes to a ServerTracker from the
// start, with the client's side of the handshake given by the other two
// arguments. It must not panic, must give the same events and error
// however the input is cut, and must buffer no more than arrived.
func FuzzServerHandshake(f *testing.F) {
	f.Add(cat(v38, []byte{1, 1}, okResult, qemuInit, update(0)), uint8(2), uint8(0))
	f.Add(cat(v38, []byte{1, 2}, challenge, failed, be32(uint32(len(authFail))), []byte(authFail)), uint8(2), uint8(1))
	f.Add(cat(v37, []byte{2, 2, 1}, qemuInit), uint8(1), uint8(0))
	f.Add(cat(v33, be32(2), challenge, okResult, longInit), uint8(0), uint8(0))
	f.Add(cat(v33, be32(0), be32(6), []byte("reason")), uint8(0), uint8(0))
	f.Add(cat(v38, []byte{0}, be32(0xFFFFFFFF)), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, clientVersion, choice uint8) {
		newTracker := func() *ServerTracker {
			s := NewSession()
			s.setClientVersion([]ProtocolVersion{{3, 3}, {3, 7}, {3, 8}}[clientVersion%3])
			if c := choice % 3; c < 2 && s.Version() != Version33 {
				s.setSecurity([]SecurityType{SecurityNone, SecurityVNCAuth}[c])
			}
			return NewServerTracker(s)
		}
		checkTrackerSplits(t, newTracker, data)
	})
}

// FuzzServerTracker feeds arbitrary bytes to a ServerTracker past the
// handshake, in one of four pixel formats. It must not panic, must give
// the same events and error however the input is cut, must only ever
// collect small headers, and its updates must add up: UpdateStart, Rects,
// UpdateEnd, whose Bytes are the header and the rectangles' bytes.
func FuzzServerTracker(f *testing.F) {
	for _, tc := range rectCases() {
		if len(tc.rect) < 4096 {
			f.Add(cat(update(1, tc.rect), bell), uint8(map[uint8]int{32: 0, 16: 1, 8: 2}[tc.pf.BitsPerPixel]))
		}
	}
	f.Add(cat([]byte{255, 1}, be16(2), be32(3), []byte("pcm"), []byte{248, 0, 0, 0}, be32(0), []byte{1, 'x'}), uint8(0))
	f.Add(update(0xFFFF, rectBytes(0, 0, 0, 0, EncodingLastRect)), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		pf := []PixelFormat{pf32, pf16, pf8, {BitsPerPixel: 32, Depth: 32, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255}}[format%4]
		evs := checkTrackerSplits(t, func() *ServerTracker { return newNormalTracker(nil, pf) }, data)
		var total, rectBytes int64
		rects, declared, open := 0, 0, false
		for _, e := range evs {
			switch e.Kind {
			case EventUpdateStart:
				if open {
					t.Fatal("an update started inside another")
				}
				open, rects, declared, rectBytes = true, 0, e.Rects, 0
			case EventRect:
				if !open {
					t.Fatal("a rectangle outside an update")
				}
				rects++
				rectBytes += e.Rect.Bytes
			case EventUpdateEnd:
				if !open || e.Rects != rects || rects > declared || e.Bytes != 4+rectBytes {
					t.Fatalf("update end %+v after %d of %d rects, %d bytes", e, rects, declared, rectBytes)
				}
				open = false
				total += e.Bytes
			case EventMessage:
				if open {
					t.Fatal("a message inside an update")
				}
				total += e.Bytes
			default:
				t.Fatalf("handshake event %v past the handshake", e.Kind)
			}
		}
		if total > int64(len(data)) {
			t.Fatalf("%d bytes of messages from %d bytes", total, len(data))
		}
	})
}

// checkTrackerSplits tracks data whole, in 7-byte chunks and byte by byte,
// requires the same outcome and bounded buffering, and returns the events.
func checkTrackerSplits(t *testing.T, newTracker func() *ServerTracker, data []byte) []Event {
	t.Helper()
	var first []Event
	var firstErr error
	for i, chunks := range [][][]byte{{data}, chunked(data, 7), chunked(data, 1)} {
		tr := newTracker()
		evs, err := trackServer(tr, chunks)
		if cap(tr.buf) > max(64, 2*len(data)) {
			t.Fatalf("a %d-byte buffer after %d bytes of input", cap(tr.buf), len(data))
		}
		if tr.phase == PhaseNormal && tr.st < sMsgType {
			t.Fatalf("normal phase in handshake step %d", tr.st)
		}
		if i == 0 {
			first, firstErr = evs, err
			continue
		}
		if !reflect.DeepEqual(evs, first) || !reflect.DeepEqual(err, firstErr) {
			t.Fatalf("feeding %d: %+v, %v\nwhole: %+v, %v", i, evs, err, first, firstErr)
		}
	}
	return first
}
