package rfb

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Pixel formats the tests use.
var (
	// pf32 is what QEMU announces: 32-bit little-endian true colour, depth 24.
	pf32 = PixelFormat{BitsPerPixel: 32, Depth: 24, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255, RedShift: 16, GreenShift: 8}
	// pf16 is 16-bit big-endian RGB565.
	pf16 = PixelFormat{BitsPerPixel: 16, Depth: 16, BigEndian: true, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}
	// pf8 is 8-bit colour-mapped.
	pf8 = PixelFormat{BitsPerPixel: 8, Depth: 8}
)

// newNormalClientParser returns a parser past the handshake.
func newNormalClientParser(s *Session) *ClientParser {
	p := NewClientParser(s)
	p.step, p.phase = cNormal, PhaseNormal
	return p
}

// newNormalTracker returns a tracker past the handshake whose pixels are pf.
func newNormalTracker(s *Session, pf PixelFormat) *ServerTracker {
	t := NewServerTracker(s)
	t.s.setServerInit(640, 480, pf)
	t.pf, t.phase = pf, PhaseNormal
	t.nextMessage()
	return t
}

// cloneBody copies the slices of b that alias the parser's bytes.
func cloneBody(b Body) Body {
	switch m := b.(type) {
	case ClientCutText:
		m.Text = bytes.Clone(m.Text)
		return m
	case ClientFence:
		m.Payload = bytes.Clone(m.Payload)
		return m
	}
	return b
}

// parsed is what a ClientParser produced from one feeding of an input.
type parsed struct {
	msgs []Message
	err  error
}

// feedClient feeds chunks to p and records copies of what it emits.
func feedClient(p *ClientParser, chunks [][]byte) parsed {
	var out parsed
	emit := func(m Message) error {
		out.msgs = append(out.msgs, Message{Raw: bytes.Clone(m.Raw), Body: cloneBody(m.Body)})
		return nil
	}
	for _, c := range chunks {
		if out.err = p.Feed(c, emit); out.err != nil {
			break
		}
	}
	return out
}

// splits returns the ways every test feeds an input: whole, cut once at
// every offset, byte by byte, and a few random multi-cuts.
func splits(in []byte) [][][]byte {
	ways := [][][]byte{{in}}
	for k := 1; k < len(in); k++ {
		ways = append(ways, [][]byte{in[:k], in[k:]})
	}
	var each [][]byte
	for i := range in {
		each = append(each, in[i:i+1])
	}
	ways = append(ways, each)
	r := rand.New(rand.NewPCG(uint64(len(in)), 6))
	for range 8 {
		var chunks [][]byte
		for rest := in; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(7))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		ways = append(ways, chunks)
	}
	return ways
}

// checkClientSplits parses in with a fresh parser from newParser for every
// way of splitting it and requires the same result each time: want and
// wantErr. It returns nothing; failures name the split.
func checkClientSplits(t *testing.T, newParser func() *ClientParser, in []byte, want []Message, wantErr error) {
	t.Helper()
	for _, chunks := range splits(in) {
		got := feedClient(newParser(), chunks)
		if !reflect.DeepEqual(got.err, wantErr) {
			t.Fatalf("split %v: error %v, want %v", chunkLens(chunks), got.err, wantErr)
		}
		if !reflect.DeepEqual(got.msgs, want) {
			t.Fatalf("split %v: messages\n%+v\nwant\n%+v", chunkLens(chunks), got.msgs, want)
		}
		if wantErr == nil {
			var all []byte
			for _, m := range got.msgs {
				all = append(all, m.Raw...)
			}
			if !bytes.Equal(all, in) {
				t.Fatalf("split %v: the messages' raw bytes do not add up to the input", chunkLens(chunks))
			}
		}
	}
}

func chunkLens(chunks [][]byte) []int {
	n := make([]int, len(chunks))
	for i, c := range chunks {
		n[i] = len(c)
	}
	return n
}

// trackServer feeds chunks to tr and records the events.
func trackServer(tr *ServerTracker, chunks [][]byte) ([]Event, error) {
	var evs []Event
	emit := func(e Event) { evs = append(evs, e) }
	for _, c := range chunks {
		if err := tr.Feed(c, emit); err != nil {
			return evs, err
		}
	}
	return evs, nil
}

// Builders for server messages.

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func s32(v int32) []byte   { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// rectBytes is a rectangle header followed by its payload.
func rectBytes(x, y, w, h uint16, enc int32, payload ...[]byte) []byte {
	return cat(be16(x), be16(y), be16(w), be16(h), s32(enc), cat(payload...))
}

// update is a FramebufferUpdate announcing n rectangles.
func update(n uint16, rects ...[]byte) []byte {
	return cat([]byte{0, 0}, be16(n), cat(rects...))
}

func filled(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

func pixelFormatBytes(pf PixelFormat) []byte {
	b, err := pf.AppendBinary(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func serverInitBytes(w, h uint16, pf PixelFormat, name string) []byte {
	return cat(be16(w), be16(h), pixelFormatBytes(pf), be32(uint32(len(name))), []byte(name))
}
