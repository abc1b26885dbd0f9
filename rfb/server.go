package rfb

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// EventKind says what a server Event reports.
type EventKind uint8

// The events, in the order a connection produces them.
const (
	// EventServerVersion: the server's version line (Version).
	EventServerVersion EventKind = iota + 1
	// EventSecurityTypes: the types a 3.7 or 3.8 server offers, or the one
	// a 3.3 server imposes (SecurityTypes, OK true); or the server's
	// refusal of the connection (OK false, Reason).
	EventSecurityTypes
	// EventVNCAuthChallenge: the 16-byte challenge went by.
	EventVNCAuthChallenge
	// EventSecurityResult: OK, or the failure with its Reason (3.8 only).
	EventSecurityResult
	// EventServerInit: the framebuffer size, pixel format and name (Init).
	EventServerInit
	// EventUpdateStart: a FramebufferUpdate header (Rects is the count it
	// announces; 65535 may mean "until LastRect").
	EventUpdateStart
	// EventRect: one rectangle of the update, complete (Rect).
	EventRect
	// EventUpdateEnd: the update's last byte (Rects seen, Bytes in all).
	EventUpdateEnd
	// EventMessage: any other server message, complete (Type, Bytes).
	EventMessage
)

func (k EventKind) String() string {
	switch k {
	case EventServerVersion:
		return "ServerVersion"
	case EventSecurityTypes:
		return "SecurityTypes"
	case EventVNCAuthChallenge:
		return "VNCAuthChallenge"
	case EventSecurityResult:
		return "SecurityResult"
	case EventServerInit:
		return "ServerInit"
	case EventUpdateStart:
		return "UpdateStart"
	case EventRect:
		return "Rect"
	case EventUpdateEnd:
		return "UpdateEnd"
	case EventMessage:
		return "Message"
	}
	return fmt.Sprintf("event %d", uint8(k))
}

// Event is what the ServerTracker reports. Only the fields its Kind names
// are set.
type Event struct {
	Kind          EventKind
	Version       ProtocolVersion
	SecurityTypes []SecurityType
	OK            bool
	Reason        string
	Init          ServerInit
	Rects         int
	Rect          Rect
	Type          ServerMessageType
	Bytes         int64
}

// ServerInit is the server's initialisation message.
type ServerInit struct {
	Width, Height uint16
	Format        PixelFormat
	Name          string
}

// serverInitHead is ServerInit's size before the name.
const serverInitHead = 24

// TightCompression is the method of a Tight rectangle.
type TightCompression uint8

// The Tight methods. TightNone marks a rectangle that is not Tight.
const (
	TightNone TightCompression = iota
	TightBasic
	TightFill
	TightJPEG
	TightPNG
)

func (c TightCompression) String() string {
	switch c {
	case TightNone:
		return "none"
	case TightBasic:
		return "basic"
	case TightFill:
		return "fill"
	case TightJPEG:
		return "jpeg"
	case TightPNG:
		return "png"
	}
	return fmt.Sprintf("tight compression %d", uint8(c))
}

// Rect is one rectangle of a FramebufferUpdate.
type Rect struct {
	X, Y, Width, Height uint16
	Encoding            int32
	// Tight is the compression method of a Tight or TightPNG rectangle.
	Tight TightCompression
	// Bytes is the rectangle's size on the wire, 12-byte header included.
	Bytes int64
}

// rectHead is a rectangle header's size.
const rectHead = 12

// serverStep is what the tracker collects or skips next.
type serverStep uint8

// The steps come in groups, one method each (see step), in this order: the
// handshake's steps all come before sMsgType.
const (
	// The security negotiation (stepSecurity).
	sVersion serverStep = iota
	sSecurityWait
	sSecurity33
	sSecurityCount
	sSecurityList
	sChoiceWait

	// Its outcome: authentication, or a failure and its reason (stepOutcome).
	sChallenge
	sResult
	sReasonLen
	sReason
	sClosed

	// ServerInit (stepInit).
	sInitHead
	sInitName

	// Server messages, all but a FramebufferUpdate's body (stepMessage).
	sMsgType
	sMsgEnd
	sColourMap
	sCutText
	sFence
	sQEMUSub
	sQEMUAudioOp
	sQEMUAudioLen

	// A FramebufferUpdate's rectangles (stepUpdate).
	sUpdateHead
	sRectHead
	sRectEnd
	sLengthThenSkip // a U32 length, then that many bytes
	sCountThenSkip  // a count, then count*t.unit bytes (RRE, CoRRE, ExtendedDesktopSize)
	sAlphaCursor
	sWMVi

	// A Hextile rectangle's tiles (stepHextile).
	sHextileTile
	sHextileSub
	sHextileNext

	// A Tight rectangle (stepTight).
	sTightCtl
	sTightFilter
	sTightPalette
	sTightData
	sTightLen
)

// errBlocked: the step needs a fact the client side has not recorded yet.
var errBlocked = errors.New("blocked")

// ServerTracker follows the server-to-client direction without changing
// it: it parses the server's half of the handshake, then frames every
// server message so the bridge knows where each FramebufferUpdate starts
// and ends (to time request-to-update latency and count updates), without
// decoding or storing pixel data.
//
// It cannot frame everything a server may send (an encoding it does not
// know, a nested cursor encoding other than Raw). It then returns an
// error and stops; the bridge must keep passing the bytes through and only
// stop measuring. Server-side trouble never justifies closing a session.
//
// A ServerTracker is not safe for concurrent use; its Session is shared
// with the connection's ClientParser.
type ServerTracker struct {
	s     *Session
	st    serverStep
	need  int    // bytes to collect into buf before running st
	buf   []byte // collected bytes; backed by hdr when need <= maxHeader
	hdr   [maxHeader]byte
	skip  int64 // bytes to pass over before running st
	err   error
	phase Phase
	emit  func(Event)

	reasonResult bool // the reason being read ends the security result, not the type list

	msgType  ServerMessageType
	msgBytes int64 // bytes of the current message (or handshake) so far

	pf        PixelFormat // for the current update
	init      ServerInit
	rectsLeft int
	rectsSeen int
	lastRect  bool
	rect      Rect
	rectStart int64
	unit      int64 // bytes per counted item for sCountThenSkip

	tileX, tileY int // the current Hextile tile, relative to the rectangle
	hexMask      byte
	hexFixed     int
	tightData    int64 // Tight pixel data size after filtering
}

// NewServerTracker returns a tracker for a connection's server direction.
// Pass the Session given to the connection's ClientParser; nil makes a
// fresh one, for tests that feed only server bytes (the handshake then
// blocks where it needs the client's choices).
func NewServerTracker(s *Session) *ServerTracker {
	if s == nil {
		s = NewSession()
	}
	t := &ServerTracker{s: s}
	t.collect(protocolVersionLen, sVersion)
	return t
}

// Session returns the state this tracker shares with its ClientParser.
func (t *ServerTracker) Session() *Session { return t.s }

// Phase reports where the tracker is.
func (t *ServerTracker) Phase() Phase { return t.phase }

// Feed follows b and calls emit (if not nil) for each event, in order.
// It returns an error (wrapping ErrProtocol) when the server's bytes break
// the protocol or cannot be framed; after that it is done and returns the
// same error again.
func (t *ServerTracker) Feed(b []byte, emit func(Event)) error {
	if t.err != nil {
		return t.err
	}
	t.emit = emit
	defer func() { t.emit = nil }()
	for {
		if t.skip > 0 {
			if len(b) == 0 {
				return nil
			}
			n := int(min(t.skip, int64(len(b))))
			t.skip -= int64(n)
			t.msgBytes += int64(n)
			b = b[n:]
			continue
		}
		if len(t.buf) < t.need {
			if len(b) == 0 {
				return nil
			}
			k := min(t.need-len(t.buf), len(b))
			t.grow(k)
			t.buf = append(t.buf, b[:k]...)
			t.msgBytes += int64(k)
			b = b[k:]
			continue
		}
		err := t.step()
		if errors.Is(err, errBlocked) {
			if len(b) == 0 {
				return nil
			}
			err = t.outOfOrder()
		}
		if err != nil {
			t.err, t.phase = err, PhaseFailed
			return err
		}
	}
}

// grow makes room for k more collected bytes, never past need.
func (t *ServerTracker) grow(k int) {
	if len(t.buf)+k <= cap(t.buf) {
		return
	}
	c := max(2*cap(t.buf), len(t.buf)+k, 64)
	nb := make([]byte, len(t.buf), min(c, t.need))
	copy(nb, t.buf)
	t.buf = nb
}

// collect makes the tracker gather n bytes, then run next.
func (t *ServerTracker) collect(n int, next serverStep) {
	t.st, t.need = next, n
	if n <= maxHeader {
		t.buf = t.hdr[:0]
	} else {
		t.buf = nil
	}
}

// skipThen makes the tracker pass over n bytes, then run next.
func (t *ServerTracker) skipThen(n int64, next serverStep) {
	t.collect(0, next)
	t.skip = n
}

func (t *ServerTracker) send(ev Event) {
	if t.emit != nil {
		t.emit(ev)
	}
}

func (t *ServerTracker) outOfOrder() error {
	if t.st == sSecurityWait {
		return protoErr("security", "the server sent security data before the client's version line")
	}
	return protoErr("security", "the server sent data before the client chose a security type")
}

// step runs st on the collected bytes, through its group's method. The
// groups are ranges of serverStep, tested from the hottest (a
// FramebufferUpdate's rectangles) down.
func (t *ServerTracker) step() error {
	switch {
	case t.st >= sTightCtl:
		return t.stepTight()
	case t.st >= sHextileTile:
		return t.stepHextile()
	case t.st >= sUpdateHead:
		return t.stepUpdate()
	case t.st >= sMsgType:
		return t.stepMessage()
	case t.st >= sInitHead:
		return t.stepInit()
	case t.st >= sChallenge:
		return t.stepOutcome()
	default:
		return t.stepSecurity()
	}
}

// nextMessage waits for the next server message's type.
func (t *ServerTracker) nextMessage() {
	t.msgBytes = 0
	t.collect(1, sMsgType)
}

// stepMessage runs the steps of a server message other than a
// FramebufferUpdate's rectangles.
func (t *ServerTracker) stepMessage() error {
	be := binary.BigEndian
	b := t.buf
	switch t.st {
	case sMsgType:
		return t.messageType(b[0])
	case sMsgEnd:
		t.send(Event{Kind: EventMessage, Type: t.msgType, Bytes: t.msgBytes})
		t.nextMessage()
	case sColourMap:
		t.skipThen(6*int64(be.Uint16(b[3:])), sMsgEnd)
	case sCutText:
		t.skipThen(cutTextLength(b), sMsgEnd)
	case sFence:
		if b[7] > MaxFencePayload {
			return &LimitError{Message: "ServerFence", Field: "length", Value: int64(b[7]), Cap: "MaxFencePayload", Limit: MaxFencePayload}
		}
		t.skipThen(int64(b[7]), sMsgEnd)
	case sQEMUSub:
		if b[0] != qemuAudioSubtype {
			return protoErr("QEMU server message", "unknown submessage type %d", b[0])
		}
		t.collect(2, sQEMUAudioOp)
	case sQEMUAudioOp:
		switch op := be.Uint16(b); op {
		case 0, 1: // end, begin
			t.collect(0, sMsgEnd)
		case 2: // data
			t.collect(4, sQEMUAudioLen)
		default:
			return protoErr("QEMU audio server message", "unknown operation %d", op)
		}
	case sQEMUAudioLen:
		t.skipThen(int64(be.Uint32(b)), sMsgEnd)
	}
	return nil
}

// cutTextLength is the text's length from ServerCutText's 7-byte head: a
// negative length announces an extended-clipboard payload of its absolute
// value.
func cutTextLength(head []byte) int64 {
	l := int64(int32(binary.BigEndian.Uint32(head[3:])))
	return max(l, -l)
}

// messageType dispatches on a server message's first byte.
func (t *ServerTracker) messageType(c byte) error {
	t.msgType = ServerMessageType(c)
	switch t.msgType {
	case MsgFramebufferUpdate:
		t.collect(3, sUpdateHead)
	case MsgSetColourMapEntries:
		t.collect(5, sColourMap)
	case MsgBell, MsgEndOfContinuousUpdates:
		t.collect(0, sMsgEnd)
	case MsgServerCutText:
		t.collect(7, sCutText)
	case MsgServerFence:
		t.collect(8, sFence)
	case MsgServerXVP:
		t.collect(3, sMsgEnd)
	case MsgServerQEMU:
		t.collect(1, sQEMUSub)
	default:
		return protoErr(t.msgType.String(), "unknown server message type; the stream cannot be framed past it")
	}
	return nil
}
