package rfb

import (
	"errors"
	"fmt"
)

// ErrProtocol is wrapped by every error the parsers return for bytes that
// break the protocol or that they cannot follow; errors.Is(err, ErrProtocol)
// tells those apart from an error the caller's emit function returned.
var ErrProtocol = errors.New("rfb protocol error")

// LimitError reports a length field above one of the package's caps. The
// parser returns it as soon as the header is complete, before it buffers
// the body.
type LimitError struct {
	Message string // the message, e.g. "ClientCutText"
	Field   string // the length field, e.g. "length"
	Value   int64  // what the peer announced
	Cap     string // the constant, e.g. "MaxCutTextLength"
	Limit   int64  // its value
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("rfb: %s %s %d exceeds %s (%d)", e.Message, e.Field, e.Value, e.Cap, e.Limit)
}

// Unwrap makes errors.Is(err, ErrProtocol) true.
func (e *LimitError) Unwrap() error { return ErrProtocol }

// ProtocolError reports bytes the parser cannot accept or cannot follow.
type ProtocolError struct {
	Message string // the message or handshake step, e.g. "SetPixelFormat"
	Detail  string // what is wrong, in words a log reader can act on
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("rfb: %s: %s", e.Message, e.Detail)
}

// Unwrap makes errors.Is(err, ErrProtocol) true.
func (e *ProtocolError) Unwrap() error { return ErrProtocol }

func protoErr(message, format string, args ...any) error {
	return &ProtocolError{Message: message, Detail: fmt.Sprintf(format, args...)}
}
