package sshbridge

import (
	"errors"
	"fmt"
)

// The errors Dial, ParseHello and ParseControl return wrap one of these, so
// callers map them with errors.Is (the bridge turns them into WebSocket close
// codes). Their texts are safe to show to the user: they never contain a key,
// passphrase or password.
var (
	// ErrBadHello: the first message is malformed, or its private key cannot
	// be parsed (including a missing passphrase).
	ErrBadHello = errors.New("bad first message")
	// ErrBadControl: a later text message is not a valid control message.
	ErrBadControl = errors.New("bad control message")
	// ErrAuthFailed: the guest refused the key or password, the guest does
	// not accept the method offered, or the key's passphrase is wrong.
	ErrAuthFailed = errors.New("ssh authentication failed")
	// ErrUnreachable: nothing answers SSH at the guest's address (refused,
	// timed out, no route, or the connection dropped before the handshake
	// finished).
	ErrUnreachable = errors.New("guest not answering on port 22")
	// ErrHostKeyChanged: the guest presented a host key other than the one
	// pinned for the VM. The error is a *HostKeyChangedError.
	ErrHostKeyChanged = errors.New("ssh host key changed")
)

// HostKeyChangedError reports that a VM's SSH host key differs from the one
// pinned on first use. errors.Is(err, ErrHostKeyChanged) holds for it.
type HostKeyChangedError struct {
	// VM is the machine whose key changed.
	VM VMRef
	// Pinned is the SHA256 fingerprint of the trusted key.
	Pinned string
	// Presented is the SHA256 fingerprint of the key the guest offered, or
	// a description when the guest offered no key of the pinned type.
	Presented string
	// Reset tells an administrator how to drop the pin (from the store's
	// ResetHint).
	Reset string
}

// Error says what changed, that it may be an attack, and how to reset.
func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("the SSH host key of VM %s changed since it was first trusted (pinned %s, now %s); "+
		"the connection was refused before logging in. If the guest was reinstalled or its host keys regenerated, "+
		"an administrator can reset the pin: %s; otherwise someone may be intercepting the connection",
		e.VM, e.Pinned, e.Presented, e.Reset)
}

// Is makes errors.Is(err, ErrHostKeyChanged) true.
func (e *HostKeyChangedError) Is(target error) bool { return target == ErrHostKeyChanged }
