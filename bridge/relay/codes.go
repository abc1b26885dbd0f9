package relay

import "github.com/gorilla/websocket"

// Close codes the bridge sends. 4000–4999 are for applications (RFC 6455
// §7.4.2); a browser client must not reconnect on CodeTakenOver.
const (
	// CodeHTTPBase plus an HTTP status carries an error known before the
	// session started (4401, 4403, 4404, 4409, 4412, 4503) to a browser,
	// which cannot read the status of a failed handshake. For 4409
	// SessionHeld the holder, as data, is in GET …/sessions.
	CodeHTTPBase = 4000
	// CodeTakenOver: another user took the session over. Do not reconnect.
	// The reason names the new holder for people; GET …/sessions has it as
	// data (the take-over reserved the session for them).
	CodeTakenOver = 4001
	// CodeIdle: no user input for the idle timeout.
	CodeIdle = 4002
	// CodeSessionLost: the bridge could not keep the session's Lease.
	CodeSessionLost = 4003
	// CodeUpstreamClosed: KubeVirt or the guest ended the connection (the
	// VM stopped or restarted, or virt-handler went away).
	CodeUpstreamClosed = 4004
	// CodeSSHHostKeyChanged: the VM's SSH host key differs from the pinned one.
	CodeSSHHostKeyChanged = 4010
	// CodeSSHAuthFailed: the guest refused the user, key or password.
	CodeSSHAuthFailed = 4011
	// CodeSSHUnreachable: nothing answers on the guest's port 22.
	CodeSSHUnreachable = 4012
	// CodeBadHello: the first SSH message was not a valid hello.
	CodeBadHello = 4013
	// CodeGoingAway: the bridge is shutting down; reconnecting reaches
	// another replica.
	CodeGoingAway = websocket.CloseGoingAway
	// CodeClientTooSlow: the client did not accept data within the write
	// timeout.
	CodeClientTooSlow = websocket.ClosePolicyViolation
	// CodeProtocolError: the client broke the protocol (an unknown or
	// oversized RFB message); the reason says which.
	CodeProtocolError = websocket.CloseProtocolError
	// CodeNormal: the other side left.
	CodeNormal = websocket.CloseNormalClosure
)

// maxReasonBytes is the room for a reason in a close frame: 125 bytes of
// control payload minus the 2-byte code.
const maxReasonBytes = 123

// Ending is why a session ended: the close code and a reason a person can
// read, sent to the client.
type Ending struct {
	Code   int
	Reason string
}

// Truncate shortens reason to fit a close frame without splitting a UTF-8
// sequence.
func Truncate(reason string) string {
	if len(reason) <= maxReasonBytes {
		return reason
	}
	cut := maxReasonBytes
	for cut > 0 && reason[cut]&0xC0 == 0x80 {
		cut--
	}
	return reason[:cut]
}
