package bridge

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/rfb"
)

// Extended clipboard flags (the RFB community's ExtendedClipboard, which
// noVNC and QEMU speak): formats in the low bits, actions in the high byte.
const (
	clipboardText    = 1 << 0
	clipboardProvide = 1 << 28
)

// input is one input message a VNC client sent QEMU (or a resize request).
type input struct {
	Name string // the message, as rfb names it
	Key  uint32 // keysym of a key event
	Down bool
	Text string // the text of a ClientCutText (provided, for the extended form)
}

// inputTap records the input messages VNC clients send a VM's QEMU, as
// the stand-in virt-handler pipes them (virthandler.Target.VNCTap), decoded
// by package rfb: what the bridge truly let through. Safe for concurrent
// use.
type inputTap struct {
	mu     sync.Mutex
	inputs []input
	conns  int
	broken []string
}

// tap is the virthandler.Target.VNCTap of t: a parser per connection.
func (t *inputTap) tap() virthandler.Tap {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns++
	s := rfb.NewSession()
	return &tapConn{t: t, client: rfb.NewClientParser(s), server: rfb.NewServerTracker(s)}
}

// since returns the inputs recorded after the first n.
func (t *inputTap) since(n int) []input {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]input(nil), t.inputs[min(n, len(t.inputs)):]...)
}

// count is how many inputs were recorded, and connections tapped.
func (t *inputTap) count() (inputs, conns int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.inputs), t.conns
}

// problems are the framing errors met: a stream the tap could not follow.
func (t *inputTap) problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.broken...)
}

type tapConn struct {
	t      *inputTap
	client *rfb.ClientParser
	server *rfb.ServerTracker
	down   bool
}

func (c *tapConn) FromClient(p []byte) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.down {
		return
	}
	if err := c.client.Feed(p, func(m rfb.Message) error {
		if in, ok := decodeInput(m.Body); ok {
			c.t.inputs = append(c.t.inputs, in)
		}
		return nil
	}); err != nil {
		c.down = true
		c.t.broken = append(c.t.broken, "client: "+err.Error())
	}
}

func (c *tapConn) FromVM(p []byte) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.down {
		return
	}
	if err := c.server.Feed(p, func(rfb.Event) {}); err != nil {
		c.down = true
		c.t.broken = append(c.t.broken, "server: "+err.Error())
	}
}

// decodeInput keeps key, pointer and clipboard messages; the text is
// copied, since the parser reuses its buffer.
func decodeInput(b rfb.Body) (input, bool) {
	switch m := b.(type) {
	case rfb.KeyEvent:
		return input{Name: m.Name(), Key: m.Key, Down: m.Down}, true
	case rfb.QEMUExtendedKeyEvent:
		return input{Name: m.Name(), Key: m.Keysym, Down: m.Down}, true
	case rfb.PointerEvent:
		return input{Name: m.Name()}, true
	case rfb.SetDesktopSize: // the page asks the guest to resize
		return input{Name: m.Name(), Text: fmt.Sprintf("%dx%d", m.Width, m.Height)}, true
	case rfb.ClientCutText:
		if !m.Extended {
			return input{Name: m.Name(), Text: string(m.Text)}, true
		}
		return input{Name: m.Name(), Text: providedText(m.Flags, m.Text)}, true
	}
	return input{}, false
}

// providedText is the text of an extended clipboard "provide": a zlib
// stream of a 4-byte length and the NUL-terminated text per format. Other
// actions (caps, notify, request) carry no text.
func providedText(flags uint32, payload []byte) string {
	if flags&clipboardProvide == 0 || flags&clipboardText == 0 {
		return ""
	}
	zr, err := zlib.NewReader(bytes.NewReader(payload))
	if err != nil {
		return "(bad zlib)"
	}
	var n uint32
	if err := binary.Read(zr, binary.BigEndian, &n); err != nil || n > rfb.MaxCutTextLength {
		return "(bad length)"
	}
	text := make([]byte, n)
	if _, err := io.ReadFull(zr, text); err != nil {
		return "(short text)"
	}
	return string(bytes.TrimRight(text, "\x00"))
}
