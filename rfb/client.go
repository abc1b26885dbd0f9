package rfb

import "encoding/binary"

// clientStep is the next thing the client sends.
type clientStep uint8

const (
	cVersion     clientStep = iota
	cSecurity               // 3.7/3.8: the choice byte; 3.3: whatever the server's type implies
	cVNCResponse            // the 16-byte response
	cClientInit             // the shared flag
	cNormal                 // client messages
)

// keepBuffer is the largest buffer a ClientParser keeps between messages;
// a larger one (a big cut text) is dropped once its message is out.
const keepBuffer = 4 << 10

// ClientParser follows the client-to-server direction: the client's half of
// the handshake, then every client message. It is a push parser: Feed it
// the bytes as they arrive, split anywhere, and it calls emit once per
// complete message with the message's exact bytes. A message split across
// chunks is buffered (at most its own length, which the caps bound); one
// inside a chunk is passed without copying.
//
// A ClientParser is not safe for concurrent use; its Session is shared
// with the connection's ServerTracker.
type ClientParser struct {
	s     *Session
	step  clientStep
	buf   []byte // the message being assembled across chunks
	need  int    // its total length, 0 while not known yet
	err   error
	phase Phase
}

// NewClientParser returns a parser for a connection's client direction.
// Pass the same Session to the connection's ServerTracker; nil makes a
// fresh one (enough for 3.7 and 3.8, whose client side depends on nothing
// the server says, except for ExtendedMouseButtons).
func NewClientParser(s *Session) *ClientParser {
	if s == nil {
		s = NewSession()
	}
	return &ClientParser{s: s}
}

// Session returns the state this parser shares with its ServerTracker.
func (p *ClientParser) Session() *Session { return p.s }

// Phase reports where the parser is.
func (p *ClientParser) Phase() Phase { return p.phase }

// Buffered is the number of bytes of an incomplete message held back.
func (p *ClientParser) Buffered() int { return len(p.buf) }

// Feed parses b and calls emit (if not nil) for each message it completes,
// in order. It returns the first error: a *ProtocolError or *LimitError
// (both wrap ErrProtocol) naming the message, or what emit returned. After
// an error the parser is done and returns the same error again.
//
// A proxy must Feed each chunk before forwarding it (or forward the Raw of
// each emitted message from emit): that is what lets the server side find
// the client's choices in the Session in time.
func (p *ClientParser) Feed(b []byte, emit func(Message) error) error {
	if p.err != nil {
		return p.err
	}
	for len(b) > 0 {
		if len(p.buf) == 0 {
			n, err := p.frame(b)
			if err != nil {
				return p.fail(err)
			}
			if n > 0 && n <= len(b) {
				raw := b[:n]
				b = b[n:]
				if err := p.handle(raw, emit); err != nil {
					return p.fail(err)
				}
				continue
			}
			p.need = n
		}
		if p.need == 0 {
			// The header is still incomplete: take one byte and look again.
			p.buf = append(p.buf, b[0])
			b = b[1:]
			n, err := p.frame(p.buf)
			if err != nil {
				return p.fail(err)
			}
			p.need = n
			if n == 0 || len(p.buf) < n {
				continue
			}
		} else {
			k := min(p.need-len(p.buf), len(b))
			p.grow(k)
			p.buf = append(p.buf, b[:k]...)
			b = b[k:]
			if len(p.buf) < p.need {
				continue
			}
		}
		err := p.handle(p.buf, emit)
		p.buf, p.need = p.buf[:0], 0
		if cap(p.buf) > keepBuffer {
			p.buf = nil
		}
		if err != nil {
			return p.fail(err)
		}
	}
	return nil
}

// grow makes room for k more bytes without ever growing past the current
// message's length, so memory follows what has arrived, not what the
// header announced.
func (p *ClientParser) grow(k int) {
	if len(p.buf)+k <= cap(p.buf) {
		return
	}
	c := max(2*cap(p.buf), len(p.buf)+k, 64)
	nb := make([]byte, len(p.buf), min(c, p.need))
	copy(nb, p.buf)
	p.buf = nb
}

func (p *ClientParser) fail(err error) error {
	p.err, p.phase = err, PhaseFailed
	return err
}

// frame returns the length of the message starting at h[0], or 0 if more
// bytes of its header are needed to know it. h is not empty.
func (p *ClientParser) frame(h []byte) (int, error) {
	switch p.step {
	case cVersion:
		return protocolVersionLen, nil
	case cSecurity:
		t, known := p.s.SecurityType()
		if known && t == SecurityInvalid {
			return 0, protoErr("security", "the client sent data after the server refused the connection")
		}
		if p.s.Version() != Version33 {
			return 1, nil
		}
		// 3.3: the server imposed the type; the client answers accordingly.
		switch {
		case !known:
			return 0, protoErr("security", "the client sent data before the server chose a security type (RFB 3.3)")
		case t == SecurityNone:
			p.step = cClientInit
			return 1, nil
		case t == SecurityVNCAuth:
			p.step = cVNCResponse
			return vncAuthLen, nil
		}
		return 0, protoErr("security", "the server chose %s, which the parser cannot follow", t)
	case cVNCResponse:
		return vncAuthLen, nil
	case cClientInit:
		return 1, nil
	}
	return p.messageLen(h)
}

// handle decodes the complete message raw, records what the Session needs
// and emits it.
func (p *ClientParser) handle(raw []byte, emit func(Message) error) error {
	var body Body
	switch p.step {
	case cVersion:
		v, err := parseProtocolVersion(raw)
		if err != nil {
			return err
		}
		p.s.setClientVersion(v)
		p.step = cSecurity
		body = v
	case cSecurity:
		t := SecurityType(raw[0])
		switch t {
		case SecurityNone:
			p.step = cClientInit
		case SecurityVNCAuth:
			p.step = cVNCResponse
		default:
			return protoErr("SecurityChoice", "the client chose %s; the parser can follow only None (1) and VNC authentication (2)", t)
		}
		p.s.setSecurity(t)
		body = SecurityChoice{Type: t}
	case cVNCResponse:
		var r VNCAuthResponse
		copy(r.Response[:], raw)
		p.step = cClientInit
		body = r
	case cClientInit:
		p.step, p.phase = cNormal, PhaseNormal
		body = ClientInit{Shared: raw[0] != 0}
	default:
		var err error
		if body, err = p.decode(raw); err != nil {
			return err
		}
	}
	if emit == nil {
		return nil
	}
	return emit(Message{Raw: raw, Body: body})
}

// decode decodes a complete client message whose length messageLen has
// checked.
func (p *ClientParser) decode(raw []byte) (Body, error) {
	be := binary.BigEndian
	switch ClientMessageType(raw[0]) {
	case MsgSetPixelFormat:
		pf := parsePixelFormat(raw[4:])
		if !pf.valid() {
			return nil, protoErr("SetPixelFormat", "bits-per-pixel %d is not 8, 16 or 32", pf.BitsPerPixel)
		}
		p.s.requestPixelFormat(pf)
		return SetPixelFormat{Format: pf}, nil
	case MsgSetEncodings:
		encs := make([]int32, be.Uint16(raw[2:]))
		for i := range encs {
			encs[i] = int32(be.Uint32(raw[4+4*i:]))
		}
		p.s.setEncodings(encs)
		return SetEncodings{Encodings: encs}, nil
	case MsgFramebufferUpdateRequest:
		return FramebufferUpdateRequest{Incremental: raw[1] != 0, X: be.Uint16(raw[2:]), Y: be.Uint16(raw[4:]), Width: be.Uint16(raw[6:]), Height: be.Uint16(raw[8:])}, nil
	case MsgKeyEvent:
		return KeyEvent{Down: raw[1] != 0, Key: be.Uint32(raw[4:])}, nil
	case MsgPointerEvent:
		if len(raw) == 7 {
			return PointerEvent{Buttons: uint16(raw[1]&0x7F) | uint16(raw[6])<<7, X: be.Uint16(raw[2:]), Y: be.Uint16(raw[4:]), Extended: true}, nil
		}
		return PointerEvent{Buttons: uint16(raw[1]), X: be.Uint16(raw[2:]), Y: be.Uint16(raw[4:])}, nil
	case MsgClientCutText:
		if int32(be.Uint32(raw[4:])) < 0 {
			return ClientCutText{Extended: true, Flags: be.Uint32(raw[8:]), Text: raw[12:]}, nil
		}
		return ClientCutText{Text: raw[8:]}, nil
	case MsgEnableContinuousUpdates:
		return EnableContinuousUpdates{Enable: raw[1] != 0, X: be.Uint16(raw[2:]), Y: be.Uint16(raw[4:]), Width: be.Uint16(raw[6:]), Height: be.Uint16(raw[8:])}, nil
	case MsgClientFence:
		return ClientFence{Flags: be.Uint32(raw[4:]), Payload: raw[9:]}, nil
	case MsgClientXVP:
		return XVP{Version: raw[2], Code: raw[3]}, nil
	case MsgSetDesktopSize:
		m := SetDesktopSize{Width: be.Uint16(raw[2:]), Height: be.Uint16(raw[4:]), Screens: make([]Screen, raw[6])}
		for i := range m.Screens {
			s := raw[8+screenLen*i:]
			m.Screens[i] = Screen{ID: be.Uint32(s), X: be.Uint16(s[4:]), Y: be.Uint16(s[6:]), Width: be.Uint16(s[8:]), Height: be.Uint16(s[10:]), Flags: be.Uint32(s[12:])}
		}
		return m, nil
	}
	// MsgClientQEMU: messageLen accepted only the two known submessages.
	if raw[1] == qemuExtendedKeyEventSubtype {
		return QEMUExtendedKeyEvent{Down: be.Uint16(raw[2:]) != 0, Keysym: be.Uint32(raw[4:]), Keycode: be.Uint32(raw[8:])}, nil
	}
	m := QEMUAudio{Operation: be.Uint16(raw[2:])}
	if m.Operation == QEMUAudioSetFormat {
		m.SampleFormat, m.Channels, m.Frequency = raw[4], raw[5], be.Uint32(raw[6:])
	}
	return m, nil
}
