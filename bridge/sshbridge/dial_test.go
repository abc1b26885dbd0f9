package sshbridge

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/virtstation/virtstation/internal/sshd"
)

// TestDialRunsAShellOnAPTY logs in with a key to a real sshd and drives the
// login shell the way the browser does: typed commands, a resize, exit.
func TestDialRunsAShellOnAPTY(t *testing.T) {
	srv := sshd.StartTest(t, sshd.Options{})
	store := NewMemoryStore()
	vm := VMRef{Namespace: "team-a", Name: "ws-1", UID: "uid-1"}
	h := keyHello(srv)
	h.Cols, h.Rows = 100, 30

	s, err := Dial(context.Background(), dialOptions(srv, h, vm, store))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer func() { _ = s.Close() }()
	if h.PrivateKey != "" {
		t.Fatal("Dial left the private key in the Hello")
	}
	sc := watch(s.Output)

	typeLine(t, s, "echo hello-$((6*7))")
	sc.expect(t, "hello-42")
	typeLine(t, s, "echo $TERM; stty size")
	sc.expect(t, "xterm-256color")
	sc.expect(t, "30 100")

	if err := s.Resize(132, 43); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	typeLine(t, s, "stty size")
	sc.expect(t, "43 132")
	if err := s.Resize(0, 43); !errors.Is(err, ErrBadControl) {
		t.Fatalf("Resize(0, 43) = %v, want ErrBadControl", err)
	}

	typeLine(t, s, "exit 3")
	var exit *ssh.ExitError
	if err := s.Wait(); !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Fatalf("Wait = %v, want exit status 3", err)
	}
	if err := sc.waitEOF(t); !errors.Is(err, io.EOF) {
		t.Fatalf("Output ended with %v, want io.EOF", err)
	}
	if pinned, found, err := store.Get(context.Background(), vm); err != nil || !found || !sameKey(pinned, srv.HostKey) {
		t.Fatalf("after the first login the pin is %v (found %t, %v), want the server's host key", pinned, found, err)
	}
}

// TestSessionClose: closing a live session ends Output and Wait.
func TestSessionClose(t *testing.T) {
	srv := sshd.StartTest(t, sshd.Options{})
	s, err := Dial(context.Background(), dialOptions(srv, keyHello(srv), VMRef{Namespace: "ns", Name: "vm"}, NewMemoryStore()))
	if err != nil {
		t.Fatal(err)
	}
	sc := watch(s.Output)
	typeLine(t, s, "echo ready")
	sc.expect(t, "ready")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := sc.waitEOF(t); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Output ended with %v after Close, want io.ErrClosedPipe", err)
	}
	select {
	case <-s.Done():
	case <-time.After(waitFor):
		t.Fatal("Wait did not return after Close")
	}
}

// TestDialAuthentication: the right credentials log in; every wrong one is
// ErrAuthFailed or ErrBadHello with a message that names the problem and
// not the secret.
func TestDialAuthentication(t *testing.T) {
	srv := sshd.StartTest(t, sshd.Options{})
	keysOnly := sshd.StartTest(t, sshd.Options{NoPassword: true})

	const passphrase = "correct horse battery"
	encrypted, encryptedPub := newEd25519(t, passphrase)
	ecKey, ecPub := newECDSASEC1(t)
	stranger, _ := newEd25519(t, "")
	for _, k := range []ssh.PublicKey{encryptedPub, ecPub} {
		if err := srv.AddAuthorizedKey(k); err != nil {
			t.Fatal(err)
		}
	}

	tests := map[string]struct {
		srv     *sshd.Server
		hello   Hello
		wantErr error
		wantMsg string
	}{
		"password": {
			srv: srv, hello: Hello{User: srv.User, Password: srv.Password},
		},
		"encrypted key with its passphrase": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: encrypted, Passphrase: passphrase},
		},
		"ECDSA key in SEC1 PEM": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: ecKey},
		},
		"wrong password": {
			srv: srv, hello: Hello{User: srv.User, Password: srv.Password + "-wrong"},
			wantErr: ErrAuthFailed, wantMsg: `ssh authentication failed: the guest refused the password for user "vstest"`,
		},
		"key the guest does not know": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: stranger},
			wantErr: ErrAuthFailed, wantMsg: `ssh authentication failed: the guest refused the private key for user "vstest"`,
		},
		"user the guest does not allow": {
			srv: srv, hello: Hello{User: "root", Password: srv.Password},
			wantErr: ErrAuthFailed, wantMsg: `ssh authentication failed: the guest refused the password for user "root"`,
		},
		"password to a guest that takes keys only": {
			srv: keysOnly, hello: Hello{User: keysOnly.User, Password: keysOnly.Password},
			wantErr: ErrAuthFailed, wantMsg: "ssh authentication failed: the guest does not accept password logins (it accepts: publickey)",
		},
		"wrong passphrase": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: encrypted, Passphrase: "wrong horse"},
			wantErr: ErrAuthFailed, wantMsg: "ssh authentication failed: the passphrase does not decrypt the private key",
		},
		"encrypted key without passphrase": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: encrypted},
			wantErr: ErrBadHello, wantMsg: "bad first message: the private key is encrypted; send its passphrase",
		},
		"damaged key": {
			srv: srv, hello: Hello{User: srv.User, PrivateKey: strings.Replace(stranger, "\n", "\nAAAA", 2)},
			wantErr: ErrBadHello, wantMsg: "bad first message: privateKey could not be parsed as an OpenSSH, PKCS#1, PKCS#8 or SEC1 private key",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := tc.hello
			secrets := []string{h.Password, h.Passphrase}
			if h.PrivateKey != "" {
				secrets = append(secrets, keyBody(h.PrivateKey))
			}
			s, err := Dial(context.Background(), dialOptions(tc.srv, &h, VMRef{Namespace: "ns", Name: "vm"}, NewMemoryStore()))
			if h.PrivateKey != "" || h.Password != "" || h.Passphrase != "" {
				t.Error("Dial left a secret in the Hello")
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				defer func() { _ = s.Close() }()
				sc := watch(s.Output)
				typeLine(t, s, "echo in-as-$(id -un)")
				sc.expect(t, "in-as-vstest")
				return
			}
			if !errors.Is(err, tc.wantErr) || err.Error() != tc.wantMsg {
				t.Fatalf("Dial error = %v, want %q (wrapping %v)", err, tc.wantMsg, tc.wantErr)
			}
			for _, secret := range secrets {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Fatalf("the error contains a secret")
				}
			}
		})
	}
}

// TestDialUnreachable: nothing (or nothing that speaks SSH) at the address
// is ErrUnreachable, and quickly.
func TestDialUnreachable(t *testing.T) {
	tests := map[string]struct {
		serve   func(net.Conn) // nil: the port is closed
		timeout time.Duration
		within  time.Duration
		also    error
	}{
		"closed port":           {within: 2 * time.Second, also: syscall.ECONNREFUSED},
		"accepts but is silent": {serve: func(c net.Conn) { time.Sleep(5 * time.Second); _ = c.Close() }, timeout: 300 * time.Millisecond, within: 2 * time.Second},
		"not an SSH server":     {serve: func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n"); _ = c.Close() }, within: 2 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			if tc.serve == nil {
				_ = l.Close() // nothing listens: connection refused
			} else {
				defer func() { _ = l.Close() }()
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						go tc.serve(c)
					}
				}()
			}
			h := &Hello{User: "u", Password: "pw-SECRET", Cols: 80, Rows: 24}
			start := time.Now()
			_, err = Dial(context.Background(), DialOptions{Addr: addr, Hello: h, VM: VMRef{Namespace: "ns", Name: "vm"}, HostKeys: NewMemoryStore(), Timeout: tc.timeout})
			if took := time.Since(start); took > tc.within {
				t.Errorf("Dial took %v, want under %v", took, tc.within)
			}
			if !errors.Is(err, ErrUnreachable) || !strings.HasPrefix(err.Error(), "guest not answering on port 22: ") {
				t.Fatalf("Dial error = %v, want ErrUnreachable", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("Dial error = %v, want it to wrap %v too", err, tc.also)
			}
		})
	}
}

// TestDialCanceled: the caller giving up is not the guest's fault.
func TestDialCanceled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer func() { _ = c.Close() }() // silent until the test ends
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = Dial(ctx, DialOptions{Addr: l.Addr().String(), Hello: &Hello{User: "u", Password: "p"}, VM: VMRef{Namespace: "ns", Name: "vm"}, HostKeys: NewMemoryStore()})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("Dial error = %v, want context.Canceled only", err)
	}
}

// TestDialHostKeyChanged pins the host key on first use, then refuses the
// guest after its host key changes, before any credential is sent, with
// both fingerprints and the reset command; a recreated VM (new UID) is
// trusted again. It runs against both stores.
func TestDialHostKeyChanged(t *testing.T) {
	stores := map[string]func(t *testing.T) HostKeyStore{
		"memory": func(*testing.T) HostKeyStore { return NewMemoryStore() },
		"configmap": func(t *testing.T) HostKeyStore {
			cs := newClientset(t)
			return NewConfigMapStore(cs, bridgeNamespace(t, cs, "virtstation-dial"))
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			srv := sshd.StartTest(t, sshd.Options{})
			vm := VMRef{Namespace: "team-a", Name: "ws-" + name, UID: "uid-1"}
			ctx := context.Background()

			s, err := Dial(ctx, dialOptions(srv, keyHello(srv), vm, store))
			if err != nil {
				t.Fatalf("first Dial: %v", err)
			}
			_ = s.Close()
			old := srv.HostKey

			if err := srv.RestartWithNewHostKey(ctx); err != nil {
				t.Fatal(err)
			}
			mark := len(srv.Logs())
			h := keyHello(srv)
			_, err = Dial(ctx, dialOptions(srv, h, vm, store))
			var changed *HostKeyChangedError
			if !errors.Is(err, ErrHostKeyChanged) || !errors.As(err, &changed) {
				t.Fatalf("Dial after the key changed = %v, want ErrHostKeyChanged", err)
			}
			want := HostKeyChangedError{VM: vm, Pinned: ssh.FingerprintSHA256(old), Presented: ssh.FingerprintSHA256(srv.HostKey), Reset: store.ResetHint(vm)}
			if *changed != want {
				t.Fatalf("error = %+v, want %+v", *changed, want)
			}
			for _, part := range []string{want.Pinned, want.Presented, want.Reset, "team-a/ws-" + name, "changed since it was first trusted"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("message %q lacks %q", err, part)
				}
			}
			if h.PrivateKey != "" {
				t.Error("Dial left the private key in the Hello")
			}
			assertNoLoginAttempt(t, srv, mark)
			if pinned, _, _ := store.Get(ctx, vm); !sameKey(pinned, old) {
				t.Error("the refused dial changed the pin")
			}

			recreated := vm
			recreated.UID = "uid-2"
			s, err = Dial(ctx, dialOptions(srv, keyHello(srv), recreated, store))
			if err != nil {
				t.Fatalf("Dial to the recreated VM: %v", err)
			}
			_ = s.Close()
			if pinned, found, err := store.Get(ctx, recreated); err != nil || !found || !sameKey(pinned, srv.HostKey) {
				t.Fatalf("the recreated VM's pin is %v, %t, %v; want the new host key", pinned, found, err)
			}
		})
	}
}

// assertNoLoginAttempt waits for sshd to log the end of the connection
// made after mark and checks that it never got to user authentication
// (sshd names the user in every line once a client asks to log in).
func assertNoLoginAttempt(t *testing.T, srv *sshd.Server, mark int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		lines := srv.Logs()[mark:]
		closed := false
		for _, l := range lines {
			if strings.Contains(l, "Close session:") {
				// The end of an earlier, accepted login, logged late: a
				// refused dial never gets as far as a session.
				continue
			}
			if strings.Contains(l, srv.User) {
				t.Fatalf("sshd saw a login attempt after the host key was refused: %q", l)
			}
			closed = closed || strings.Contains(l, "[preauth]")
		}
		if closed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd never logged the refused connection's end; log since: %q", lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
