package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamples renders every example VM against the example cluster objects
// (namespaces, data disks, key Secrets) and compares with its golden file,
// so the examples docs/usage.md names and what the webhook does to them
// cannot drift.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var objects bytes.Buffer
	var vmFiles []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "kind: VirtualMachine\n") {
			vmFiles = append(vmFiles, f)
			continue
		}
		objects.WriteString("---\n")
		objects.Write(b)
	}
	objFile := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(objFile, objects.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range vmFiles {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			want := exitOK
			if b, _ := os.ReadFile(f); strings.HasPrefix(string(b), "# expect: denied") {
				want = exitDenied
			}
			code := run(context.Background(), []string{"render", "-f", f, "--objects", objFile}, streams{out: &stdout, err: &stderr})
			if code != want {
				t.Fatalf("exit %d, want %d: %s", code, want, stderr.String())
			}
			out := stdout.Bytes()
			if stderr.Len() > 0 {
				out = append(append(out, "# stderr:\n"...), stderr.Bytes()...)
			}
			golden(t, filepath.Join("testdata", "examples", name+".golden"), out)
		})
	}
}
