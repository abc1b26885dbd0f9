package rfb

import (
	"encoding/binary"
	"fmt"
)

// messageLen returns the length of the client message starting at h[0], or
// 0 if more header bytes are needed; it refuses lengths above the caps.
func (p *ClientParser) messageLen(h []byte) (int, error) {
	switch t := ClientMessageType(h[0]); t {
	case MsgSetPixelFormat:
		return 4 + pixelFormatLen, nil
	case MsgSetEncodings:
		return setEncodingsLen(h)
	case MsgFramebufferUpdateRequest, MsgEnableContinuousUpdates:
		return 10, nil
	case MsgKeyEvent:
		return 8, nil
	case MsgPointerEvent:
		if len(h) < 2 {
			return 0, nil
		}
		if h[1]&0x80 != 0 && p.s.extendedPointer() {
			return 7, nil
		}
		return 6, nil
	case MsgClientCutText:
		return clientCutTextLen(h)
	case MsgClientFence:
		return clientFenceLen(h)
	case MsgClientXVP:
		return 4, nil
	case MsgSetDesktopSize:
		return setDesktopSizeLen(h)
	case MsgClientQEMU:
		return qemuClientMessageLen(h)
	default:
		return 0, protoErr(fmt.Sprintf("client message type %d", uint8(t)), "unknown message type; the stream cannot be followed past it")
	}
}

// The functions below return the length of the message of their type
// starting at h[0], or 0 if more header bytes are needed, like messageLen.

func setEncodingsLen(h []byte) (int, error) {
	if len(h) < 4 {
		return 0, nil
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n > MaxEncodings {
		return 0, &LimitError{Message: "SetEncodings", Field: "number-of-encodings", Value: int64(n), Cap: "MaxEncodings", Limit: MaxEncodings}
	}
	return 4 + 4*n, nil
}

func clientCutTextLen(h []byte) (int, error) {
	if len(h) < 8 {
		return 0, nil
	}
	l := int64(int32(binary.BigEndian.Uint32(h[4:])))
	n := max(l, -l)
	if n > MaxCutTextLength {
		return 0, &LimitError{Message: "ClientCutText", Field: "length", Value: n, Cap: "MaxCutTextLength", Limit: MaxCutTextLength}
	}
	if l < 0 && n < 4 {
		return 0, protoErr("ClientCutText", "extended clipboard payload of %d bytes is shorter than its 4-byte flags", n)
	}
	return 8 + int(n), nil
}

func clientFenceLen(h []byte) (int, error) {
	if len(h) < 9 {
		return 0, nil
	}
	n := int(h[8])
	if n > MaxFencePayload {
		return 0, &LimitError{Message: "ClientFence", Field: "length", Value: int64(n), Cap: "MaxFencePayload", Limit: MaxFencePayload}
	}
	return 9 + n, nil
}

func setDesktopSizeLen(h []byte) (int, error) {
	if len(h) < 8 {
		return 0, nil
	}
	n := int(h[6])
	if n > MaxScreens {
		return 0, &LimitError{Message: "SetDesktopSize", Field: "number-of-screens", Value: int64(n), Cap: "MaxScreens", Limit: MaxScreens}
	}
	return 8 + screenLen*n, nil
}

// qemuClientMessageLen knows QEMU's two client submessages: the extended
// key event and audio.
func qemuClientMessageLen(h []byte) (int, error) {
	if len(h) < 2 {
		return 0, nil
	}
	switch h[1] {
	case qemuExtendedKeyEventSubtype:
		return 12, nil
	case qemuAudioSubtype:
		if len(h) < 4 {
			return 0, nil
		}
		switch op := binary.BigEndian.Uint16(h[2:]); op {
		case QEMUAudioEnable, QEMUAudioDisable:
			return 4, nil
		case QEMUAudioSetFormat:
			return 10, nil
		default:
			return 0, protoErr("QEMUAudio", "unknown operation %d", op)
		}
	}
	return 0, protoErr("QEMU client message", "unknown submessage type %d", h[1])
}
