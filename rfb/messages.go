package rfb

import (
	"encoding/binary"
	"fmt"
)

// Message is one complete client-to-server message, handshake steps
// included.
type Message struct {
	// Raw is the message's exact bytes. A proxy forwards it unchanged or
	// replaces it with its own encoding. It aliases the parser's input or
	// buffer: it is valid only until the emit callback returns.
	Raw []byte
	// Body is the decoded message, one of the types implementing Body in
	// this package. Slices in it (text, payloads) alias Raw.
	Body Body
}

// Body is a decoded client message: ProtocolVersion, SecurityChoice,
// VNCAuthResponse, ClientInit, SetPixelFormat, SetEncodings,
// FramebufferUpdateRequest, KeyEvent, PointerEvent, ClientCutText,
// EnableContinuousUpdates, ClientFence, XVP, SetDesktopSize,
// QEMUExtendedKeyEvent or QEMUAudio. AppendBinary appends the wire form,
// so a Body parsed from Raw encodes back to Raw (padding bytes zeroed).
type Body interface {
	// Name is the message's name in the RFB specification.
	Name() string
	AppendBinary(b []byte) ([]byte, error)
	isBody()
}

// ProtocolVersion is the 12-byte "RFB xxx.yyy\n" line, from either peer.
type ProtocolVersion struct {
	Major, Minor int
}

// protocolVersionLen is the length of the version line.
const protocolVersionLen = 12

// Version maps the line to the handshake it implies: 3.3 (also 3.4 and
// 3.5, which some clients send and the spec says to read as 3.3), 3.7 or
// 3.8. Anything else is VersionUnknown, which the parsers refuse, as QEMU
// does.
func (v ProtocolVersion) Version() Version {
	if v.Major != 3 {
		return VersionUnknown
	}
	switch v.Minor {
	case 3, 4, 5:
		return Version33
	case 7:
		return Version37
	case 8:
		return Version38
	}
	return VersionUnknown
}

func (v ProtocolVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// parseProtocolVersion reads a 12-byte version line.
func parseProtocolVersion(b []byte) (ProtocolVersion, error) {
	digits := func(d []byte) (int, bool) {
		n := 0
		for _, c := range d {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	major, okMajor := digits(b[4:7])
	minor, okMinor := digits(b[8:11])
	if string(b[:4]) != "RFB " || b[7] != '.' || b[11] != '\n' || !okMajor || !okMinor {
		return ProtocolVersion{}, protoErr("ProtocolVersion", "%q is not a version line \"RFB xxx.yyy\\n\"", b)
	}
	v := ProtocolVersion{Major: major, Minor: minor}
	if v.Version() == VersionUnknown {
		return ProtocolVersion{}, protoErr("ProtocolVersion", "version %s is not 3.3, 3.7 or 3.8", v)
	}
	return v, nil
}

// SecurityChoice is the byte a 3.7 or 3.8 client sends to pick a type.
type SecurityChoice struct {
	Type SecurityType
}

// VNCAuthResponse is the client's DES-encrypted challenge.
type VNCAuthResponse struct {
	Response [16]byte
}

// vncAuthLen is the size of the VNC authentication challenge and response.
const vncAuthLen = 16

// ClientInit ends the client's handshake.
type ClientInit struct {
	Shared bool
}

// SetPixelFormat asks the server for pixels in Format.
type SetPixelFormat struct {
	Format PixelFormat
}

// SetEncodings lists the encodings and pseudo-encodings the client
// accepts, most preferred first. QEMU resets its encoding state on every
// one, so a rewrite must carry the client's full list.
type SetEncodings struct {
	Encodings []int32
}

// FramebufferUpdateRequest asks for an update of an area.
type FramebufferUpdateRequest struct {
	Incremental   bool
	X, Y          uint16
	Width, Height uint16
}

// KeyEvent presses or releases a key given by its X keysym.
type KeyEvent struct {
	Down bool
	Key  uint32
}

// PointerEvent moves the pointer and reports buttons 1 to 15 as bits 0 to
// 14 of Buttons. Extended is the 7-byte form of the ExtendedMouseButtons
// extension: on the wire, bit 7 of the mask byte is then a marker, the mask
// byte carries buttons 1 to 7 and an extra last byte buttons 8 to 15. In
// the 6-byte form bit 7 is button 8.
type PointerEvent struct {
	Buttons  uint16
	X, Y     uint16
	Extended bool
}

// ClientCutText carries clipboard text. A negative length on the wire marks
// the extended-clipboard form: Flags, then Text is the rest of the payload
// (zlib-compressed data or format lists, per Flags).
type ClientCutText struct {
	Extended bool
	Flags    uint32
	Text     []byte
}

// EnableContinuousUpdates turns continuous updates on or off for an area.
type EnableContinuousUpdates struct {
	Enable        bool
	X, Y          uint16
	Width, Height uint16
}

// ClientFence is a fence request or response.
type ClientFence struct {
	Flags   uint32
	Payload []byte
}

// XVP asks for a shutdown, reboot or reset.
type XVP struct {
	Version, Code uint8
}

// SetDesktopSize asks for a new framebuffer size and screen layout.
type SetDesktopSize struct {
	Width, Height uint16
	Screens       []Screen
}

// QEMUExtendedKeyEvent is QEMU's key event with an XT scancode.
type QEMUExtendedKeyEvent struct {
	Down    bool
	Keysym  uint32
	Keycode uint32
}

// QEMU audio client operations.
const (
	QEMUAudioEnable    uint16 = 0
	QEMUAudioDisable   uint16 = 1
	QEMUAudioSetFormat uint16 = 2
)

// QEMUAudio enables or disables audio, or sets its format (the other
// fields are meaningful only for QEMUAudioSetFormat).
type QEMUAudio struct {
	Operation    uint16
	SampleFormat uint8
	Channels     uint8
	Frequency    uint32
}

// Name implements Body: "ProtocolVersion", as the RFB specification names it.
func (ProtocolVersion) Name() string { return "ProtocolVersion" }

// Name implements Body: "SecurityChoice", as the RFB specification names it.
func (SecurityChoice) Name() string { return "SecurityChoice" }

// Name implements Body: "VNCAuthResponse", as the RFB specification names it.
func (VNCAuthResponse) Name() string { return "VNCAuthResponse" }

// Name implements Body: "ClientInit", as the RFB specification names it.
func (ClientInit) Name() string { return "ClientInit" }

// Name implements Body: "SetPixelFormat", as the RFB specification names it.
func (SetPixelFormat) Name() string { return "SetPixelFormat" }

// Name implements Body: "SetEncodings", as the RFB specification names it.
func (SetEncodings) Name() string { return "SetEncodings" }

// Name implements Body: "FramebufferUpdateRequest", as the RFB
// specification names it.
func (FramebufferUpdateRequest) Name() string { return "FramebufferUpdateRequest" }

// Name implements Body: "KeyEvent", as the RFB specification names it.
func (KeyEvent) Name() string { return "KeyEvent" }

// Name implements Body: "PointerEvent", as the RFB specification names it.
func (PointerEvent) Name() string { return "PointerEvent" }

// Name implements Body: "ClientCutText", as the RFB specification names it.
func (ClientCutText) Name() string { return "ClientCutText" }

// Name implements Body: "EnableContinuousUpdates", as the RFB
// specification names it.
func (EnableContinuousUpdates) Name() string { return "EnableContinuousUpdates" }

// Name implements Body: "ClientFence", as the RFB specification names it.
func (ClientFence) Name() string { return "ClientFence" }

// Name implements Body: "xvp", as the RFB specification names it.
func (XVP) Name() string { return "xvp" }

// Name implements Body: "SetDesktopSize", as the RFB specification names it.
func (SetDesktopSize) Name() string { return "SetDesktopSize" }

// Name implements Body: "QEMUExtendedKeyEvent", as the RFB
// specification names it.
func (QEMUExtendedKeyEvent) Name() string { return "QEMUExtendedKeyEvent" }

// Name implements Body: "QEMUAudio", as the RFB specification names it.
func (QEMUAudio) Name() string { return "QEMUAudio" }

func (ProtocolVersion) isBody()          {}
func (SecurityChoice) isBody()           {}
func (VNCAuthResponse) isBody()          {}
func (ClientInit) isBody()               {}
func (SetPixelFormat) isBody()           {}
func (SetEncodings) isBody()             {}
func (FramebufferUpdateRequest) isBody() {}
func (KeyEvent) isBody()                 {}
func (PointerEvent) isBody()             {}
func (ClientCutText) isBody()            {}
func (EnableContinuousUpdates) isBody()  {}
func (ClientFence) isBody()              {}
func (XVP) isBody()                      {}
func (SetDesktopSize) isBody()           {}
func (QEMUExtendedKeyEvent) isBody()     {}
func (QEMUAudio) isBody()                {}

// AppendBinary appends the version line.
func (v ProtocolVersion) AppendBinary(b []byte) ([]byte, error) {
	if v.Major < 0 || v.Major > 999 || v.Minor < 0 || v.Minor > 999 {
		return b, protoErr("ProtocolVersion", "version %s does not fit xxx.yyy", v)
	}
	return fmt.Appendf(b, "RFB %03d.%03d\n", v.Major, v.Minor), nil
}

// AppendBinary appends the security-type byte.
func (m SecurityChoice) AppendBinary(b []byte) ([]byte, error) {
	return append(b, byte(m.Type)), nil
}

// AppendBinary appends the 16-byte response.
func (m VNCAuthResponse) AppendBinary(b []byte) ([]byte, error) {
	return append(b, m.Response[:]...), nil
}

// AppendBinary appends the shared flag.
func (m ClientInit) AppendBinary(b []byte) ([]byte, error) {
	return append(b, boolByte(m.Shared)), nil
}

// AppendBinary appends the 20-byte message.
func (m SetPixelFormat) AppendBinary(b []byte) ([]byte, error) {
	if !m.Format.valid() {
		return b, protoErr("SetPixelFormat", "bits-per-pixel %d is not 8, 16 or 32", m.Format.BitsPerPixel)
	}
	return m.Format.AppendBinary(append(b, byte(MsgSetPixelFormat), 0, 0, 0))
}

// AppendBinary appends the message; more than MaxEncodings is an error, so
// the bridge never sends what its own parser would refuse.
func (m SetEncodings) AppendBinary(b []byte) ([]byte, error) {
	if len(m.Encodings) > MaxEncodings {
		return b, &LimitError{Message: "SetEncodings", Field: "number-of-encodings", Value: int64(len(m.Encodings)), Cap: "MaxEncodings", Limit: MaxEncodings}
	}
	b = append(b, byte(MsgSetEncodings), 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Encodings)))
	for _, e := range m.Encodings {
		b = binary.BigEndian.AppendUint32(b, uint32(e))
	}
	return b, nil
}

// AppendBinary appends the 10-byte request.
func (m FramebufferUpdateRequest) AppendBinary(b []byte) ([]byte, error) {
	return appendFramebufferUpdateRequest(b, m.Incremental, m.X, m.Y, m.Width, m.Height), nil
}

func appendFramebufferUpdateRequest(b []byte, incremental bool, x, y, w, h uint16) []byte {
	b = append(b, byte(MsgFramebufferUpdateRequest), boolByte(incremental))
	return appendArea(b, x, y, w, h)
}

// AppendBinary appends the 8-byte event.
func (m KeyEvent) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, byte(MsgKeyEvent), boolByte(m.Down), 0, 0)
	return binary.BigEndian.AppendUint32(b, m.Key), nil
}

// AppendBinary appends the 6-byte event, or the 7-byte one if Extended.
// Buttons above 8 need the extended form; the 6-byte form carries 1 to 8.
func (m PointerEvent) AppendBinary(b []byte) ([]byte, error) {
	if m.Extended {
		if m.Buttons>>15 != 0 {
			return b, protoErr("PointerEvent", "button mask %#x has bits above button 15", m.Buttons)
		}
		b = append(b, byte(MsgPointerEvent), byte(m.Buttons&0x7F)|0x80)
		b = binary.BigEndian.AppendUint16(b, m.X)
		b = binary.BigEndian.AppendUint16(b, m.Y)
		return append(b, byte(m.Buttons>>7)), nil
	}
	if m.Buttons>>8 != 0 {
		return b, protoErr("PointerEvent", "button mask %#x needs the extended form", m.Buttons)
	}
	b = append(b, byte(MsgPointerEvent), byte(m.Buttons))
	b = binary.BigEndian.AppendUint16(b, m.X)
	return binary.BigEndian.AppendUint16(b, m.Y), nil
}

// AppendBinary appends the message, checking MaxCutTextLength.
func (m ClientCutText) AppendBinary(b []byte) ([]byte, error) {
	n := int64(len(m.Text))
	if m.Extended {
		n += 4
	}
	if n > MaxCutTextLength {
		return b, &LimitError{Message: "ClientCutText", Field: "length", Value: n, Cap: "MaxCutTextLength", Limit: MaxCutTextLength}
	}
	b = append(b, byte(MsgClientCutText), 0, 0, 0)
	if !m.Extended {
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		return append(b, m.Text...), nil
	}
	b = binary.BigEndian.AppendUint32(b, uint32(-int32(n)))
	b = binary.BigEndian.AppendUint32(b, m.Flags)
	return append(b, m.Text...), nil
}

// AppendBinary appends the 10-byte message.
func (m EnableContinuousUpdates) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, byte(MsgEnableContinuousUpdates), boolByte(m.Enable))
	return appendArea(b, m.X, m.Y, m.Width, m.Height), nil
}

// AppendBinary appends the message, checking MaxFencePayload.
func (m ClientFence) AppendBinary(b []byte) ([]byte, error) {
	if len(m.Payload) > MaxFencePayload {
		return b, &LimitError{Message: "ClientFence", Field: "length", Value: int64(len(m.Payload)), Cap: "MaxFencePayload", Limit: MaxFencePayload}
	}
	b = append(b, byte(MsgClientFence), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, m.Flags)
	b = append(b, byte(len(m.Payload)))
	return append(b, m.Payload...), nil
}

// AppendBinary appends the 4-byte message.
func (m XVP) AppendBinary(b []byte) ([]byte, error) {
	return append(b, byte(MsgClientXVP), 0, m.Version, m.Code), nil
}

// AppendBinary appends the message, checking MaxScreens.
func (m SetDesktopSize) AppendBinary(b []byte) ([]byte, error) {
	if len(m.Screens) > MaxScreens {
		return b, &LimitError{Message: "SetDesktopSize", Field: "number-of-screens", Value: int64(len(m.Screens)), Cap: "MaxScreens", Limit: MaxScreens}
	}
	b = append(b, byte(MsgSetDesktopSize), 0)
	b = binary.BigEndian.AppendUint16(b, m.Width)
	b = binary.BigEndian.AppendUint16(b, m.Height)
	b = append(b, byte(len(m.Screens)), 0)
	for _, s := range m.Screens {
		b = binary.BigEndian.AppendUint32(b, s.ID)
		b = appendArea(b, s.X, s.Y, s.Width, s.Height)
		b = binary.BigEndian.AppendUint32(b, s.Flags)
	}
	return b, nil
}

// AppendBinary appends the 12-byte message.
func (m QEMUExtendedKeyEvent) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, byte(MsgClientQEMU), qemuExtendedKeyEventSubtype)
	b = binary.BigEndian.AppendUint16(b, uint16(boolByte(m.Down)))
	b = binary.BigEndian.AppendUint32(b, m.Keysym)
	return binary.BigEndian.AppendUint32(b, m.Keycode), nil
}

// AppendBinary appends the 4-byte message, or the 10-byte one for
// QEMUAudioSetFormat.
func (m QEMUAudio) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, byte(MsgClientQEMU), qemuAudioSubtype)
	b = binary.BigEndian.AppendUint16(b, m.Operation)
	switch m.Operation {
	case QEMUAudioEnable, QEMUAudioDisable:
		return b, nil
	case QEMUAudioSetFormat:
		b = append(b, m.SampleFormat, m.Channels)
		return binary.BigEndian.AppendUint32(b, m.Frequency), nil
	}
	return b[:len(b)-4], protoErr("QEMUAudio", "unknown operation %d", m.Operation)
}

func appendArea(b []byte, x, y, w, h uint16) []byte {
	b = binary.BigEndian.AppendUint16(b, x)
	b = binary.BigEndian.AppendUint16(b, y)
	b = binary.BigEndian.AppendUint16(b, w)
	return binary.BigEndian.AppendUint16(b, h)
}

// EncodeSetEncodings is SetEncodings{Encodings: encodings}.AppendBinary(nil):
// the message the adaptive controller sends when it rewrites the client's.
func EncodeSetEncodings(encodings []int32) ([]byte, error) {
	return SetEncodings{Encodings: encodings}.AppendBinary(nil)
}

// EncodeFramebufferUpdateRequest returns a FramebufferUpdateRequest: the
// controller injects a non-incremental one for the idle repaint.
func EncodeFramebufferUpdateRequest(incremental bool, x, y, width, height uint16) []byte {
	return appendFramebufferUpdateRequest(make([]byte, 0, 10), incremental, x, y, width, height)
}
