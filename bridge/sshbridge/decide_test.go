package sshbridge

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestHostKeyAlgorithms(t *testing.T) {
	ecKey := func() ssh.PublicKey { _, pub := newECDSASEC1(t); return pub }()
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := ssh.NewPublicKey(&rsaPriv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pinned ssh.PublicKey
		want   []string
	}{
		"nothing pinned: ed25519 first, no certificates": {
			pinned: nil,
			want:   []string{"ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"},
		},
		"ed25519 pinned":  {pinned: newHostKey(t), want: []string{"ssh-ed25519"}},
		"ecdsa pinned":    {pinned: ecKey, want: []string{"ecdsa-sha2-nistp256"}},
		"rsa pinned: all": {pinned: rsaKey, want: []string{"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hostKeyAlgorithms(tc.pinned); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithDefaultPort(t *testing.T) {
	tests := map[string]string{
		"10.0.0.5":       "10.0.0.5:22",
		"10.0.0.5:2222":  "10.0.0.5:2222",
		"fd00::1":        "[fd00::1]:22",
		"[fd00::1]":      "[fd00::1]:22",
		"[fd00::1]:22":   "[fd00::1]:22",
		"vm.ns.svc":      "vm.ns.svc:22",
		"vm.ns.svc:8022": "vm.ns.svc:8022",
	}
	for in, want := range tests {
		if got := withDefaultPort(in); got != want {
			t.Errorf("withDefaultPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnswerPrompts(t *testing.T) {
	password := func() (string, error) { return "pw", nil }
	tests := map[string]struct {
		questions []string
		echos     []bool
		want      []string
		wantErr   bool
	}{
		"information only":   {questions: nil, echos: nil, want: []string{}},
		"one hidden prompt":  {questions: []string{"Password: "}, echos: []bool{false}, want: []string{"pw"}},
		"one echoed prompt":  {questions: []string{"Username: "}, echos: []bool{true}, wantErr: true},
		"password and a OTP": {questions: []string{"Password: ", "Code: "}, echos: []bool{false, false}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := answerPrompts(tc.questions, tc.echos, password)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, %v; want %q (error %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestClassify: each way a handshake fails maps to the error the user sees.
func TestClassify(t *testing.T) {
	vm := VMRef{Namespace: "ns", Name: "vm"}
	pinned := newHostKey(t)
	store := NewMemoryStore()
	storeDown := errors.New("configmaps is forbidden")
	tests := map[string]struct {
		err       error
		accepted  bool  // the host key passed
		checkErr  error // the host key check failed with this
		pinned    ssh.PublicKey
		attempted bool
		allowed   []string
		want      error
		wantMsg   string
	}{
		"host key check failed": {
			err: errors.New("ssh: handshake failed: x"), checkErr: &HostKeyChangedError{VM: vm}, want: ErrHostKeyChanged,
		},
		"store failed during the check": {
			err: errors.New("ssh: handshake failed: x"), checkErr: storeDown, want: storeDown,
		},
		"guest no longer offers the pinned key type": {
			err:    fmt.Errorf("ssh: handshake failed: %w", &ssh.AlgorithmNegotiationError{What: "host key", RequestedAlgorithms: []string{"rsa-sha2-512"}}),
			pinned: pinned, want: ErrHostKeyChanged,
			wantMsg: "now no ssh-ed25519 key at all, it offers rsa-sha2-512",
		},
		"no common cipher": {
			err:     fmt.Errorf("ssh: handshake failed: %w", &ssh.AlgorithmNegotiationError{What: "client to server cipher"}),
			wantMsg: "ssh handshake with the guest failed: ssh: handshake failed: ssh: no common algorithm for client to server cipher",
		},
		"connection dropped": {
			err: fmt.Errorf("ssh: handshake failed: %w", io.EOF), want: ErrUnreachable,
		},
		"credential refused": {
			err: errors.New("ssh: handshake failed: ssh: unable to authenticate"), accepted: true, attempted: true, want: ErrAuthFailed,
			wantMsg: `ssh authentication failed: the guest refused the password for user "u"`,
		},
		"method not offered": {
			err: errors.New("ssh: handshake failed: ssh: unable to authenticate"), accepted: true, allowed: []string{"publickey", "gssapi-with-mic"}, want: ErrAuthFailed,
			wantMsg: "ssh authentication failed: the guest does not accept password logins (it accepts: publickey, gssapi-with-mic)",
		},
		"keyboard-interactive counts as password": {
			err: errors.New("ssh: handshake failed: ssh: unable to authenticate"), accepted: true, allowed: []string{"keyboard-interactive"}, want: ErrAuthFailed,
			wantMsg: `ssh authentication failed: the guest refused user "u"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			check := &hostKeyCheck{ctx: context.Background(), store: store, vm: vm, pinned: tc.pinned, err: tc.checkErr}
			if tc.accepted {
				check.accepted = pinned
			}
			creds := &credentials{user: "u", password: "p", attempted: tc.attempted, allowed: tc.allowed}
			err := classify(tc.err, check, creds, tc.pinned)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("classify = %v, want %v", err, tc.want)
			}
			for _, sentinel := range []error{ErrHostKeyChanged, ErrAuthFailed, ErrUnreachable, ErrBadHello} {
				if !errors.Is(tc.want, sentinel) && errors.Is(err, sentinel) {
					t.Fatalf("classify = %v, also %v", err, sentinel)
				}
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("classify = %q, want it to contain %q", err, tc.wantMsg)
			}
		})
	}
}

// TestMemoryStore: trust on first use, per VM, reset by a new UID.
func TestMemoryStore(t *testing.T) {
	testStoreSemantics(t, NewMemoryStore(), "memory")
}

// testStoreSemantics is what every HostKeyStore must do.
func testStoreSemantics(t *testing.T, store HostKeyStore, vmName string) {
	t.Helper()
	ctx := context.Background()
	a, b := newHostKey(t), newHostKey(t)
	vm := VMRef{Namespace: "team-a", Name: vmName, UID: "uid-1"}
	other := VMRef{Namespace: "team-b", Name: vm.Name, UID: "uid-1"}

	get := func(v VMRef) ssh.PublicKey {
		t.Helper()
		k, found, err := store.Get(ctx, v)
		if err != nil {
			t.Fatalf("Get(%s): %v", v, err)
		}
		if !found {
			return nil
		}
		return k
	}
	if get(vm) != nil {
		t.Fatal("a fresh store has a pin")
	}
	if err := store.Pin(ctx, vm, a); err != nil {
		t.Fatalf("first Pin: %v", err)
	}
	if !sameKey(get(vm), a) {
		t.Fatal("Get does not return the pinned key")
	}
	if err := store.Pin(ctx, vm, a); err != nil {
		t.Fatalf("Pin of the same key again: %v", err)
	}
	err := store.Pin(ctx, vm, b)
	var changed *HostKeyChangedError
	if !errors.As(err, &changed) || changed.Pinned != ssh.FingerprintSHA256(a) || changed.Presented != ssh.FingerprintSHA256(b) || changed.Reset != store.ResetHint(vm) {
		t.Fatalf("Pin of another key = %v, want a HostKeyChangedError from %s to %s", err, ssh.FingerprintSHA256(a), ssh.FingerprintSHA256(b))
	}
	if !sameKey(get(vm), a) {
		t.Fatal("a refused Pin replaced the key")
	}
	if get(other) != nil {
		t.Fatal("a VM of the same name in another namespace shares the pin")
	}
	if k := get(VMRef{Namespace: vm.Namespace, Name: vm.Name}); !sameKey(k, a) {
		t.Fatal("a lookup without UID does not find the pin")
	}

	recreated := vm
	recreated.UID = "uid-2"
	if get(recreated) != nil {
		t.Fatal("a recreated VM (new UID) inherits the old pin")
	}
	if err := store.Pin(ctx, recreated, b); err != nil {
		t.Fatalf("Pin for the recreated VM: %v", err)
	}
	if !sameKey(get(recreated), b) || get(vm) != nil {
		t.Fatal("the recreated VM's pin did not replace the old one")
	}
}
