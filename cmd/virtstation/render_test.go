package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestRender(t *testing.T) {
	cases := map[string]struct {
		args     []string
		stdin    string
		wantCode int
	}{
		"derived-mac":       {args: []string{"-f", "vm.yaml"}, wantCode: exitOK},
		"derived-mac-json":  {args: []string{"-f", "vm.yaml", "-o", "json"}, wantCode: exitOK},
		"mixed-namespace":   {args: []string{"-f", "mixed.yaml", "-n", "team-b"}, wantCode: exitOK},
		"collision-rehash":  {args: []string{"-f", "vm.yaml", "--objects", "taken.yaml"}, wantCode: exitOK},
		"update-keeps-mac":  {args: []string{"-f", "vm.yaml", "--objects", "stored.yaml"}, wantCode: exitOK},
		"denied":            {args: []string{"-f", "denied.yaml"}, wantCode: exitDenied},
		"stdin":             {args: []string{"-f", "-"}, stdin: "kind: VirtualMachine\napiVersion: kubevirt.io/v1\nmetadata: {name: s, labels: {virtstation.io/managed: \"true\"}}\nspec: {template: {spec: {domain: {devices: {}}}}}\n", wantCode: exitOK},
		"unreadable-yaml":   {args: []string{"-f", "broken.yaml"}, wantCode: exitBadInput},
		"missing-file":      {args: []string{"-f", "nope.yaml"}, wantCode: exitBadInput},
		"bad-output-format": {args: []string{"-f", "vm.yaml", "-o", "xml"}, wantCode: exitBadInput},
		"no-file-flag":      {args: nil, wantCode: exitBadInput},
		"policy-denied":     {args: []string{"-f", "policy-denied.yaml", "--objects", "claimed.yaml"}, wantCode: exitDenied},
		"claims-bypass":     {args: []string{"-f", "claims-bypass.yaml", "--objects", "claimed.yaml"}, wantCode: exitDenied},
		"policy-skipped":    {args: []string{"-f", "policy-denied.yaml", "--objects", "claimed.yaml", "--no-policies"}, wantCode: exitOK},
		// The user's own Secret has the name of one Virtstation writes: the
		// webhook denies, and so does render (it printed a replacement).
		"foreign-userdata-secret":         {args: []string{"-f", "foreign-userdata.yaml"}, wantCode: exitDenied},
		"foreign-userdata-secret-cluster": {args: []string{"-f", "vm-userdata-ref.yaml", "--objects", "foreign-userdata.yaml"}, wantCode: exitDenied},
		// The webhook reads no Secret: a foreign keys Secret is the
		// reconciler's to report, and render warns.
		"foreign-ssh-keys-secret": {args: []string{"-f", "foreign-ssh-keys.yaml"}, wantCode: exitOK},
		// generateName VMs are previewed with the suffix the API server would add.
		"generate-name":           {args: []string{"-f", "generate-name.yaml", "--generate-name-suffix", "x7k2q"}, wantCode: exitOK},
		"generate-name-no-suffix": {args: []string{"-f", "generate-name.yaml"}, wantCode: exitBadInput},
		// The cluster's default architecture: a KubeVirt CR among the
		// objects, or --architecture, which wins.
		"arch-from-kubevirt-cr":     {args: []string{"-f", "arch.yaml", "--objects", "arch-objects.yaml"}, wantCode: exitOK},
		"arch-flag-wins":            {args: []string{"-f", "arch.yaml", "--objects", "arch-objects.yaml", "--architecture", "amd64"}, wantCode: exitOK},
		"arch-vga-denied-on-s390x":  {args: []string{"-f", "arch-vga.yaml", "--architecture", "s390x"}, wantCode: exitDenied},
		"arch-unknown-architecture": {args: []string{"-f", "arch.yaml", "--architecture", "ppc64le"}, wantCode: exitBadInput},
	}
	dir := filepath.Join("testdata", "render")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Chdir(dir)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"render"}, tc.args...),
				streams{in: strings.NewReader(tc.stdin), out: &stdout, err: &stderr})
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			golden(t, name+".stdout.golden", stdout.Bytes())
			golden(t, name+".stderr.golden", stderr.Bytes())
		})
	}
}

// TestRenderIsIdempotent feeds render's output back in: the second pass must
// print the same bytes, as the webhook's reinvocation would leave the VM.
func TestRenderIsIdempotent(t *testing.T) {
	t.Chdir(filepath.Join("testdata", "render"))
	var first, second, stderr bytes.Buffer
	if code := run(context.Background(), []string{"render", "-f", "mixed.yaml", "-n", "team-b"}, streams{out: &first, err: &stderr}); code != exitOK {
		t.Fatalf("first pass: exit %d: %s", code, stderr.String())
	}
	if code := run(context.Background(), []string{"render", "-f", "-", "-n", "team-b"}, streams{in: bytes.NewReader(first.Bytes()), out: &second, err: &stderr}); code != exitOK {
		t.Fatalf("second pass: exit %d: %s", code, stderr.String())
	}
	if first.String() != second.String() {
		t.Fatalf("render is not idempotent:\nfirst:\n%s\nsecond:\n%s", first.String(), second.String())
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(name, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/virtstation -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestPolicyTest(t *testing.T) {
	cases := map[string]struct {
		args     []string
		wantCode int
		want     string
	}{
		"shipped policies":          {args: []string{"policy", "test"}, wantCode: exitOK, want: "all tests passed"},
		"operator policies pass":    {args: []string{"policy", "test", "policies-ok"}, wantCode: exitOK, want: "all tests passed"},
		"operator test fails":       {args: []string{"policy", "test", "policies-failing"}, wantCode: exitFailure, want: "test_four_disks_denied"},
		"no rego in directory":      {args: []string{"policy", "test", "."}, wantCode: exitBadInput, want: "no *.rego files"},
		"operator policy too slow":  {args: []string{"policy", "test", "policies-slow"}, wantCode: exitFailure, want: "took longer than the 100ms budget, most of it in slow.rego"},
		"unknown policy subcommand": {args: []string{"policy", "lint"}, wantCode: exitBadInput, want: "usage"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Chdir(filepath.Join("testdata", "render"))
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, streams{out: &stdout, err: &stderr})
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s%s", tc.want, stdout.String(), stderr.String())
			}
		})
	}
}
