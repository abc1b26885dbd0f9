package sshd

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// login logs in to s with auth, checking the host key against want, and
// returns the output of cmd.
func login(t *testing.T, s *Server, want ssh.PublicKey, auth ssh.AuthMethod, cmd string) (string, error) {
	t.Helper()
	cfg := &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{auth},
		HostKeyCallback: ssh.FixedHostKey(want),
		Timeout:         5 * time.Second,
	}
	c, err := ssh.Dial("tcp", s.Addr, cfg)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	sess, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer func() { _ = sess.Close() }()
	out, err := sess.CombinedOutput(cmd)
	return strings.TrimSpace(string(out)), err
}

func TestServerAcceptsTheClientKeyAndThePassword(t *testing.T) {
	s := StartTest(t, Options{})
	signer, err := ssh.ParsePrivateKey(s.ClientKeyPEM)
	if err != nil {
		t.Fatalf("ClientKeyPEM does not parse: %v", err)
	}
	if !bytes.Equal(signer.PublicKey().Marshal(), s.ClientKey.Marshal()) {
		t.Fatal("ClientKeyPEM is not the private half of ClientKey")
	}
	tests := map[string]ssh.AuthMethod{
		"key":      ssh.PublicKeys(signer),
		"password": ssh.Password(s.Password),
	}
	for name, auth := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := login(t, s, s.HostKey, auth, "id -un")
			if err != nil || out != TestUser {
				t.Fatalf("id -un = %q, %v; want %q", out, err, TestUser)
			}
		})
	}
	if _, err := login(t, s, s.HostKey, ssh.Password(s.Password+"x"), "true"); err == nil {
		t.Fatal("a wrong password logged in")
	}
}

func TestNoPasswordRefusesPasswords(t *testing.T) {
	s := StartTest(t, Options{NoPassword: true})
	if _, err := login(t, s, s.HostKey, ssh.Password(s.Password), "true"); err == nil {
		t.Fatal("password login worked with NoPassword")
	}
}

func TestRestartWithNewHostKey(t *testing.T) {
	s := StartTest(t, Options{})
	signer, err := ssh.ParsePrivateKey(s.ClientKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	old, addr := s.HostKey, s.Addr
	if err := s.RestartWithNewHostKey(context.Background()); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if s.Addr != addr || bytes.Equal(old.Marshal(), s.HostKey.Marshal()) {
		t.Fatalf("after restart addr %s (was %s), host key changed: %v", s.Addr, addr, !bytes.Equal(old.Marshal(), s.HostKey.Marshal()))
	}
	if _, err := login(t, s, old, ssh.PublicKeys(signer), "true"); err == nil {
		t.Fatal("the server still presents the old host key")
	}
	if out, err := login(t, s, s.HostKey, ssh.PublicKeys(signer), "echo ok"); err != nil || out != "ok" {
		t.Fatalf("with the new host key: %q, %v", out, err)
	}
}

func TestStopClosesThePort(t *testing.T) {
	s := StartTest(t, Options{})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts after Stop", s.Addr)
	}
	if len(s.Logs()) == 0 {
		t.Fatal("no sshd log lines were kept")
	}
}
