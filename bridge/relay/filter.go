package relay

import (
	"bytes"
	"encoding/json"

	"github.com/gorilla/websocket"
)

// maxControlBytes bounds a text message that may be a control message.
const maxControlBytes = 256

// IsResize reports whether a text message is a terminal resize control
// message, {"type":"resize","cols":N,"rows":N}, as xterm.js clients send.
func IsResize(kind int, p []byte) bool {
	if kind != websocket.TextMessage || len(p) > maxControlBytes || !bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) {
		return false
	}
	var m struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(p, &m) == nil && m.Type == "resize"
}

// ConsoleFilter passes serial bytes through and swallows resize messages: a
// serial line has no window size, and the bytes would reach the guest's
// shell as typed text.
func ConsoleFilter(kind int, p []byte) ([]byte, bool, error) {
	if IsResize(kind, p) {
		return nil, false, nil
	}
	return p, true, nil
}
