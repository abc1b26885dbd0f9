package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/test/qemu"
)

// TestDemo runs `virtstation demo` as `make demo` does (exiting after it has
// shown everything) and checks what a newcomer would see.
func TestDemo(t *testing.T) {
	if _, err := exec.LookPath(qemu.Binary); err != nil {
		t.Fatalf("the demo's bridge needs QEMU (make test-deps installs it): %v", err)
	}
	t.Setenv("DEMO_EXIT", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	args := []string{"-f", filepath.Join("..", "..", "examples"), "--bridge-address", "127.0.0.1:0",
		"--kubeconfig", filepath.Join(t.TempDir(), "kubeconfig")}
	if code := runDemo(ctx, args, streams{out: &out, err: &errs}); code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	for _, want := range []string{
		"virtstation pinned MAC", // the webhook mutated the examples
		"denied",                 // the policies refused the bad example
		"the guest answered \"HELLO VIRTSTATION\"", // a console session through the bridge reached QEMU
		"409 Conflict", // one session per VM
		"alice.token",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	if errs.Len() > 0 {
		t.Errorf("demo wrote to stderr:\n%s", errs.String())
	}
}
