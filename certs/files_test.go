package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// reloadTimeout is well below certwatcher's 10 s poll: a reload within it
// came from the file watch, the path the webhook server relies on.
const reloadTimeout = 3 * time.Second

// watchSetup gives certwatcher.Start time to add its watches.
const watchSetup = 300 * time.Millisecond

// TestWritePairReloadsCertwatcher writes successive pairs into a cert dir
// watched by controller-runtime's certwatcher, the one the webhook server
// uses, and checks that each is served at once and that only one payload
// directory is left behind.
func TestWritePairReloadsCertwatcher(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	ca, err := newCA(time.Now(), time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	first := mustIssue(t, ca, time.Now())
	if err := writePair(dir, first.certPEM, first.keyPEM); err != nil {
		t.Fatal(err)
	}
	cw, err := certwatcher.New(filepath.Join(dir, SecretKeyServingCert), filepath.Join(dir, SecretKeyServingKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cw.Start(ctx) }()
	// Start adds its file watches asynchronously and has no signal for it.
	time.Sleep(watchSetup)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	for i := range 3 {
		next := mustIssue(t, ca, time.Now())
		if err := writePair(dir, next.certPEM, next.keyPEM); err != nil {
			t.Fatal(err)
		}
		if !pairOnDisk(dir, next.certPEM, next.keyPEM) {
			t.Fatalf("write %d: files differ from what was written", i)
		}
		deadline := time.Now().Add(reloadTimeout)
		for {
			c, _ := cw.GetCertificate(nil)
			if c != nil && bytes.Equal(c.Certificate[0], next.cert.Raw) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("write %d: certwatcher still serves the old certificate after %s", i, reloadTimeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	payloads := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), payloadPrefix) {
			payloads++
		}
	}
	if payloads != 1 {
		t.Errorf("%d payload directories left in %s, want 1", payloads, dir)
	}
}

// TestWritePairReplacesRegularFiles covers a cert dir first filled by
// something else (plain files), as an emptyDir reused across restarts may be.
func TestWritePairReplacesRegularFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := newCA(time.Now(), time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	old, next := mustIssue(t, ca, time.Now()), mustIssue(t, ca, time.Now())
	for name, data := range map[string][]byte{SecretKeyServingCert: old.certPEM, SecretKeyServingKey: old.keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := writePair(dir, next.certPEM, next.keyPEM); err != nil {
		t.Fatal(err)
	}
	kp, err := readPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !kp.cert.Equal(next.cert) {
		t.Error("cert dir does not serve the new pair")
	}
}
