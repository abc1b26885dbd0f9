package sshbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

const (
	// DefaultDialTimeout bounds Dial when DialOptions.Timeout is zero: TCP
	// connect, key exchange, authentication and opening the shell. A guest
	// whose sshd does reverse DNS or slow PAM can take several seconds to
	// authenticate; one that has not answered in 15 s is not going to.
	DefaultDialTimeout = 15 * time.Second

	// sshPort is the port added to an Addr that has none.
	sshPort = "22"
	// clientVersion identifies the bridge in the guest's sshd log.
	clientVersion = "SSH-2.0-virtstation-bridge"
)

// DialOptions say where to connect and as whom.
type DialOptions struct {
	// Addr is the guest's address, host:port; without a port, 22.
	Addr string
	// Hello carries the user, secret and terminal size. Dial wipes its
	// secret fields before it returns, whatever the outcome.
	Hello *Hello
	// VM identifies the machine for host-key pinning.
	VM VMRef
	// HostKeys pins host keys (trust on first use).
	HostKeys HostKeyStore
	// Timeout bounds the whole of Dial; zero means DefaultDialTimeout.
	Timeout time.Duration
}

// Dial connects to the guest's sshd, checks its host key against the pin
// for the VM (pinning it on first use), authenticates, and starts a login
// shell on a PTY of the Hello's size. ctx and Timeout bound Dial only; the
// Session lives until Close or until the shell exits.
//
// The host key is checked during key exchange, before any credential is
// sent: a changed key returns a *HostKeyChangedError and the guest never
// sees the key or password. Errors wrap ErrBadHello, ErrHostKeyChanged,
// ErrAuthFailed or ErrUnreachable where they apply; a failing host key store
// or a canceled ctx returns their own error.
//
// The private key is parsed in memory and never written anywhere. Dial wipes
// opts.Hello's secret fields and drops its own references to the parsed key
// (zeroing ed25519 key bytes) once authentication is over; Go cannot promise
// that no copy is left for the garbage collector, but none stays reachable
// from the Session.
func Dial(ctx context.Context, opts DialOptions) (*Session, error) {
	if opts.Hello == nil {
		return nil, fmt.Errorf("%w: no first message", ErrBadHello)
	}
	defer opts.Hello.Wipe()
	if err := opts.check(); err != nil {
		return nil, err
	}
	h, creds, err := takeCredentials(opts.Hello)
	if err != nil {
		return nil, err
	}
	defer creds.wipe()

	dctx, cancel := context.WithTimeout(ctx, dialTimeout(opts.Timeout))
	defer cancel()
	pinned, found, err := opts.HostKeys.Get(dctx, opts.VM)
	if err != nil {
		return nil, err
	}
	if !found {
		pinned = nil
	}
	addr := withDefaultPort(opts.Addr)
	conn, err := connect(ctx, dctx, addr)
	if err != nil {
		return nil, err
	}
	check := &hostKeyCheck{ctx: dctx, store: opts.HostKeys, vm: opts.VM, pinned: pinned}
	return login(ctx, dctx, conn, addr, &h, creds, check)
}

// takeCredentials checks the hello and takes its secrets into credentials.
// It wipes them from hello and from the copy it returns, which keeps the
// user and the terminal size.
func takeCredentials(hello *Hello) (Hello, *credentials, error) {
	h := *hello
	if err := validateHello(helloType, &h); err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrBadHello, err)
	}
	creds, err := newCredentials(&h)
	h.Wipe()
	hello.Wipe()
	return h, creds, err
}

// dialTimeout is DialOptions.Timeout, or its default.
func dialTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultDialTimeout
	}
	return d
}

// canceled returns the error Dial reports when the caller's ctx ended, or
// nil while it has not.
func canceled(ctx context.Context, addr string) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("dial ssh %s: %w", addr, context.Cause(ctx))
}

// connect opens the TCP connection to the guest's sshd within dctx.
func connect(ctx, dctx context.Context, addr string) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(dctx, "tcp", addr)
	if err != nil {
		if err := canceled(ctx, addr); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return conn, nil
}

// login runs the SSH handshake on conn as h's user, checking the host key
// with check, and starts the shell, all within dctx; it closes conn if it
// fails.
func login(ctx, dctx context.Context, conn net.Conn, addr string, h *Hello, creds *credentials, check *hostKeyCheck) (*Session, error) {
	deadline, _ := dctx.Deadline()
	_ = conn.SetDeadline(deadline) // a failed deadline shows up as a failed handshake
	// x/crypto's handshake takes no ctx: closing the conn unblocks it.
	stopCloser := context.AfterFunc(dctx, func() { _ = conn.Close() })

	cfg := &ssh.ClientConfig{
		User:              h.User,
		Auth:              creds.authMethods(),
		AuthCallback:      creds.observe,
		HostKeyCallback:   check.callback,
		HostKeyAlgorithms: hostKeyAlgorithms(check.pinned),
		ClientVersion:     clientVersion,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		stopCloser()
		if err := canceled(ctx, addr); err != nil {
			return nil, err
		}
		return nil, classify(err, check, creds, check.pinned)
	}
	creds.wipe()
	client := ssh.NewClient(c, chans, reqs)
	s, err := startShell(client, h.Cols, h.Rows)
	if err != nil {
		stopCloser()
		_ = client.Close() // the shell error is the one to report
		if err := canceled(ctx, addr); err != nil {
			return nil, err
		}
		if isNetworkError(err) {
			return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return nil, err
	}
	if !stopCloser() {
		// dctx ended just now and the conn is (being) closed.
		_ = s.Close() // always nil
		if err := canceled(ctx, addr); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, context.Cause(dctx))
	}
	_ = conn.SetDeadline(time.Time{}) // the session then fails on its own
	return s, nil
}

// check reports options that are the caller's mistake, not the user's.
func (o DialOptions) check() error {
	switch {
	case o.Addr == "":
		return errors.New("sshbridge: DialOptions.Addr is empty")
	case o.HostKeys == nil:
		return errors.New("sshbridge: DialOptions.HostKeys is nil")
	case o.VM.Namespace == "" || o.VM.Name == "":
		return errors.New("sshbridge: DialOptions.VM needs a namespace and a name")
	}
	return nil
}

// withDefaultPort adds port 22 to an address that has none.
func withDefaultPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), sshPort)
}

// hostKeyCheck verifies the guest's host key against the VM's pin during
// key exchange, and remembers what went wrong for classify.
type hostKeyCheck struct {
	ctx    context.Context
	store  HostKeyStore
	vm     VMRef
	pinned ssh.PublicKey // nil: trust on first use

	mu       sync.Mutex
	accepted ssh.PublicKey // the key of the first exchange; re-keys must match it
	err      error
}

// callback is the ssh.HostKeyCallback. The first exchange compares with the
// pin or pins; a re-key later in the session must present the same key and
// never touches the store (ctx has ended by then).
func (k *hostKeyCheck) callback(_ string, _ net.Addr, key ssh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.accepted != nil {
		return checkPinned(k.store, k.vm, k.accepted, key)
	}
	var err error
	if k.pinned != nil {
		err = checkPinned(k.store, k.vm, k.pinned, key)
	} else {
		err = k.store.Pin(k.ctx, k.vm, key)
	}
	if err != nil {
		k.err = err
		return err
	}
	k.accepted = key
	return nil
}

// result returns whether the key was accepted and the error if not.
func (k *hostKeyCheck) result() (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.accepted != nil, k.err
}

// classify turns a failed handshake into the error the bridge reports.
func classify(err error, check *hostKeyCheck, creds *credentials, pinned ssh.PublicKey) error {
	accepted, hostKeyErr := check.result()
	if hostKeyErr != nil {
		return hostKeyErr
	}
	var neg *ssh.AlgorithmNegotiationError
	if errors.As(err, &neg) && neg.What == "host key" && pinned != nil {
		return &HostKeyChangedError{
			VM:        check.vm,
			Pinned:    ssh.FingerprintSHA256(pinned),
			Presented: fmt.Sprintf("no %s key at all, it offers %s", pinned.Type(), strings.Join(neg.RequestedAlgorithms, ", ")),
			Reset:     check.store.ResetHint(check.vm),
		}
	}
	if isNetworkError(err) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if accepted {
		// Past the key exchange, the only thing left to fail is
		// authentication: x/crypto's "unable to authenticate", or the
		// guest disconnecting after too many failures.
		return creds.authError()
	}
	return fmt.Errorf("ssh handshake with the guest failed: %w", err)
}

// isNetworkError reports whether err means the guest (or the path to it)
// stopped answering, rather than answering no.
func isNetworkError(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT):
		return true
	case errors.As(err, &ne):
		return ne.Timeout()
	}
	return false
}
