package rfb

import (
	"encoding/binary"
	"fmt"
)

// Version is the flavour of the handshake two peers agreed on. Only three
// exist; other numbers on the wire map to one of them (see ProtocolVersion).
type Version uint8

// The protocol versions. VersionUnknown means the version lines have not
// been seen yet.
const (
	VersionUnknown Version = iota
	Version33
	Version37
	Version38
)

func (v Version) String() string {
	switch v {
	case Version33:
		return "3.3"
	case Version37:
		return "3.7"
	case Version38:
		return "3.8"
	}
	return "unknown"
}

// Phase is how far a parser has followed its direction of the connection.
type Phase uint8

// The phases.
const (
	// PhaseHandshake: version, security and initialisation messages.
	PhaseHandshake Phase = iota
	// PhaseNormal: after ClientInit (client) or ServerInit (server).
	PhaseNormal
	// PhaseClosed: the server refused the connection or the
	// authentication; it closes the connection next.
	PhaseClosed
	// PhaseFailed: the parser returned an error and follows no further.
	PhaseFailed
)

func (p Phase) String() string {
	switch p {
	case PhaseHandshake:
		return "handshake"
	case PhaseNormal:
		return "normal"
	case PhaseClosed:
		return "closed"
	case PhaseFailed:
		return "failed"
	}
	return fmt.Sprintf("phase %d", uint8(p))
}

// SecurityType is a security type number from the handshake.
type SecurityType uint8

// The security types the parsers can follow. Any other type tunnels or
// encrypts what follows, so a proxy that must read the stream cannot use it.
const (
	SecurityInvalid SecurityType = 0
	SecurityNone    SecurityType = 1
	SecurityVNCAuth SecurityType = 2
)

func (t SecurityType) String() string {
	switch t {
	case SecurityInvalid:
		return "Invalid"
	case SecurityNone:
		return "None"
	case SecurityVNCAuth:
		return "VNC authentication"
	}
	return fmt.Sprintf("security type %d", uint8(t))
}

// ClientMessageType is the first byte of a client-to-server message.
type ClientMessageType uint8

// The client-to-server message types the parser knows. Every other type is
// an error: RFB has no framing, so a message of unknown length loses the
// parser its place in the stream (and QEMU disconnects such a client too).
const (
	MsgSetPixelFormat           ClientMessageType = 0
	MsgSetEncodings             ClientMessageType = 2
	MsgFramebufferUpdateRequest ClientMessageType = 3
	MsgKeyEvent                 ClientMessageType = 4
	MsgPointerEvent             ClientMessageType = 5
	MsgClientCutText            ClientMessageType = 6
	MsgEnableContinuousUpdates  ClientMessageType = 150
	MsgClientFence              ClientMessageType = 248
	MsgClientXVP                ClientMessageType = 250
	MsgSetDesktopSize           ClientMessageType = 251
	MsgClientQEMU               ClientMessageType = 255
)

// ServerMessageType is the first byte of a server-to-client message.
type ServerMessageType uint8

// The server-to-client message types the tracker frames.
const (
	MsgFramebufferUpdate      ServerMessageType = 0
	MsgSetColourMapEntries    ServerMessageType = 1
	MsgBell                   ServerMessageType = 2
	MsgServerCutText          ServerMessageType = 3
	MsgEndOfContinuousUpdates ServerMessageType = 150
	MsgServerFence            ServerMessageType = 248
	MsgServerXVP              ServerMessageType = 250
	MsgServerQEMU             ServerMessageType = 255
)

// QEMU submessage types (the byte after message type 255).
const (
	qemuExtendedKeyEventSubtype = 0 // client only
	qemuAudioSubtype            = 1 // both directions
)

func (t ServerMessageType) String() string {
	switch t {
	case MsgFramebufferUpdate:
		return "FramebufferUpdate"
	case MsgSetColourMapEntries:
		return "SetColourMapEntries"
	case MsgBell:
		return "Bell"
	case MsgServerCutText:
		return "ServerCutText"
	case MsgEndOfContinuousUpdates:
		return "EndOfContinuousUpdates"
	case MsgServerFence:
		return "ServerFence"
	case MsgServerXVP:
		return "xvp"
	case MsgServerQEMU:
		return "QEMU"
	}
	return fmt.Sprintf("server message type %d", uint8(t))
}

// Encodings and pseudo-encodings, as signed 32-bit numbers on the wire.
// The ones marked "framed" are those the ServerTracker can find the end of
// in a FramebufferUpdate; a rectangle in any other encoding stops it.
const (
	EncodingRaw      int32 = 0    // framed
	EncodingCopyRect int32 = 1    // framed
	EncodingRRE      int32 = 2    // framed
	EncodingCoRRE    int32 = 4    // framed
	EncodingHextile  int32 = 5    // framed
	EncodingZlib     int32 = 6    // framed
	EncodingTight    int32 = 7    // framed
	EncodingZRLE     int32 = 16   // framed
	EncodingZYWRLE   int32 = 17   // framed (same wire format as ZRLE)
	EncodingTightPNG int32 = -260 // framed; QEMU's Tight variant with PNG

	// EncodingJPEGQuality0 is the lowest JPEG quality level; levels 0..9
	// are EncodingJPEGQuality0+level (-32..-23). QEMU honours them only
	// when its display has lossy=on.
	EncodingJPEGQuality0 int32 = -32
	// EncodingCompressLevel0 is compression level 0; levels 0..9 are
	// EncodingCompressLevel0+level (-256..-247).
	EncodingCompressLevel0 int32 = -256

	EncodingDesktopSize          int32 = -223 // framed
	EncodingLastRect             int32 = -224 // framed
	EncodingPointerPos           int32 = -232 // framed
	EncodingCursor               int32 = -239 // framed
	EncodingXCursor              int32 = -240 // framed
	EncodingPointerTypeChange    int32 = -257 // framed (QEMU)
	EncodingQEMUExtendedKeyEvent int32 = -258 // framed (QEMU)
	EncodingQEMUAudio            int32 = -259 // framed (QEMU)
	EncodingQEMULEDState         int32 = -261 // framed (QEMU)
	EncodingDesktopName          int32 = -307 // framed
	EncodingExtendedDesktopSize  int32 = -308 // framed
	EncodingXVP                  int32 = -309
	EncodingFence                int32 = -312
	EncodingContinuousUpdates    int32 = -313
	EncodingCursorWithAlpha      int32 = -314        // framed when its pixels are Raw (QEMU's are)
	EncodingExtendedMouseButtons int32 = -316        // framed
	EncodingExtendedClipboard    int32 = -1063131698 // 0xC0A1E5CE
	EncodingWMVi                 int32 = 0x574D5669  // framed; a new pixel format
)

// PixelFormat is the 16-byte PIXEL_FORMAT of ServerInit and SetPixelFormat.
type PixelFormat struct {
	BitsPerPixel uint8
	Depth        uint8
	BigEndian    bool
	TrueColour   bool
	RedMax       uint16
	GreenMax     uint16
	BlueMax      uint16
	RedShift     uint8
	GreenShift   uint8
	BlueShift    uint8
}

// pixelFormatLen is PIXEL_FORMAT's size on the wire, padding included.
const pixelFormatLen = 16

// BytesPerPixel is the size of a PIXEL: 1, 2 or 4.
func (pf PixelFormat) BytesPerPixel() int { return int(pf.BitsPerPixel) / 8 }

// TPixelSize is the size of a Tight TPIXEL: 3 for 32-bit true colour of
// depth 24 with 8-bit channels, otherwise a whole PIXEL. (QEMU checks the
// channel maxima but not the depth; a client asking for depth 32 with
// 8-bit channels gets 3-byte TPIXELs from QEMU and 4 by the spec. No known
// client does that, and the tracker follows the spec.)
func (pf PixelFormat) TPixelSize() int {
	if pf.TrueColour && pf.BitsPerPixel == 32 && pf.Depth == 24 &&
		pf.RedMax == 0xFF && pf.GreenMax == 0xFF && pf.BlueMax == 0xFF {
		return 3
	}
	return pf.BytesPerPixel()
}

func (pf PixelFormat) valid() bool {
	return pf.BitsPerPixel == 8 || pf.BitsPerPixel == 16 || pf.BitsPerPixel == 32
}

// AppendBinary appends the 16-byte wire form, padding zeroed.
func (pf PixelFormat) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, pf.BitsPerPixel, pf.Depth, boolByte(pf.BigEndian), boolByte(pf.TrueColour))
	b = binary.BigEndian.AppendUint16(b, pf.RedMax)
	b = binary.BigEndian.AppendUint16(b, pf.GreenMax)
	b = binary.BigEndian.AppendUint16(b, pf.BlueMax)
	return append(b, pf.RedShift, pf.GreenShift, pf.BlueShift, 0, 0, 0), nil
}

func parsePixelFormat(b []byte) PixelFormat {
	return PixelFormat{
		BitsPerPixel: b[0],
		Depth:        b[1],
		BigEndian:    b[2] != 0,
		TrueColour:   b[3] != 0,
		RedMax:       binary.BigEndian.Uint16(b[4:]),
		GreenMax:     binary.BigEndian.Uint16(b[6:]),
		BlueMax:      binary.BigEndian.Uint16(b[8:]),
		RedShift:     b[10],
		GreenShift:   b[11],
		BlueShift:    b[12],
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Screen is one SCREEN of SetDesktopSize and ExtendedDesktopSize.
type Screen struct {
	ID     uint32
	X, Y   uint16
	Width  uint16
	Height uint16
	Flags  uint32
}

const screenLen = 16
