// Package sshbridge is the SSH leg of the bridge: it turns the browser's
// first message into an SSH login to the guest and hands back a terminal.
//
// # Messages
//
// The first WebSocket message is JSON, parsed by ParseHello:
//
//	{"type":"ssh","user":"alice","privateKey":"-----BEGIN OPENSSH PRIVATE KEY-----...","passphrase":"...","cols":120,"rows":40}
//	{"type":"ssh","user":"alice","password":"...","cols":120,"rows":40}
//
// After it, binary messages are terminal input and text messages are JSON
// control messages, parsed by ParseControl: {"type":"resize","cols":N,"rows":N}.
// Both parsers are strict (exact keys, no unknown or repeated fields, one
// object, size caps) and their errors never quote a secret.
//
// # Dialing
//
// Dial connects with golang.org/x/crypto/ssh, authenticates with the key
// (publickey) or the password (password, then keyboard-interactive with a
// single hidden prompt), requests an xterm-256color PTY of the requested
// size and starts the login shell. Session.Resize sends window-change.
//
// Secrets: the private key is parsed in memory and never stored. Dial clears
// the Hello's secret fields and drops every reference it holds to the key
// and password once authentication is over; ed25519 key bytes are zeroed.
// Go does not let a program erase its strings or every internal copy the
// crypto libraries make, so this limits how long secrets stay reachable; it
// does not guarantee the bytes are gone from memory.
//
// Failures the user must hear about are typed: ErrBadHello, ErrAuthFailed,
// ErrUnreachable and ErrHostKeyChanged (a *HostKeyChangedError), all
// errors.Is-able. Their messages are safe to show.
//
// # Host keys: trust on first use, pinned per VM
//
// The first successful key exchange with a VM pins the key the guest
// presented; later connections must present the same key, or Dial refuses
// with ErrHostKeyChanged before any credential is sent. When a pin exists,
// only host-key algorithms of the pinned key's type are offered, so a guest
// with several host keys is always checked against the pinned one. A pin is
// tied to the VM's UID: a VM deleted and recreated under the same name is a
// new machine and is trusted on first use again.
//
// Pins live in a HostKeyStore. MemoryStore keeps them in the process (tests,
// a single replica that may forget them on restart). ConfigMapStore keeps
// one ConfigMap per VM in the bridge's namespace, named by ConfigMapName
// ("vs-hostkey-<hash of namespace/name>") and labelled
// app.kubernetes.io/managed-by=virtstation-bridge,
// virtstation.io/vm-namespace=<ns>, virtstation.io/vm-name=<name>; replicas
// race safely (create if absent, then compare). An administrator resets a
// VM's pin, after reinstalling its guest for instance, by deleting that
// ConfigMap:
//
//	kubectl -n <bridge-namespace> delete configmap vs-hostkey-<hash>
//	kubectl -n <bridge-namespace> delete configmap -l virtstation.io/vm-namespace=<ns>,virtstation.io/vm-name=<name>
//
// The exact first command is in every HostKeyChangedError. A ConfigMap in
// another namespace cannot be owned by the VM for garbage collection, so
// the bridge's janitor (package janitor) deletes the pins of deleted VMs.
package sshbridge
