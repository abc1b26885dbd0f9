package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopWithin is how soon render must exit after a signal or a denial.
const stopWithin = 5 * time.Second

// buildCLI builds the virtstation binary, for the tests that run it as a
// user would.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "virtstation")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}
	return bin
}

// waitExit waits for cmd to exit, at most stopWithin, and returns its exit
// code and how long it took; it kills cmd and fails the test past that.
func waitExit(t *testing.T, cmd *exec.Cmd, since time.Time) (int, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(since)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("wait: %v", err)
		}
		if exit != nil && exit.ExitCode() < 0 {
			t.Fatalf("render was killed (%v) instead of exiting", err)
		}
		return cmd.ProcessState.ExitCode(), took
	case <-time.After(stopWithin):
		_ = cmd.Process.Kill()
		err := <-done // Wait's "signal: killed", or nil had it exited just now
		t.Fatalf("render still running %v later (wait after kill: %v)", stopWithin, err)
		return 0, 0
	}
}

// TestRenderProcess runs the built CLI as a user would.
func TestRenderProcess(t *testing.T) {
	bin := buildCLI(t)
	t.Run("stops on signals", func(t *testing.T) { testRenderStopsOnSignal(t, bin) })
	t.Run("denies a huge GPU count at once", func(t *testing.T) { testRenderDeniesHugeGPUCount(t, bin) })
}

// testRenderStopsOnSignal runs the CLI, reading its manifest from a stdin
// that never closes, and signals it: it must exit at once, as interrupted.
func testRenderStopsOnSignal(t *testing.T, bin string) {
	for name, sig := range map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, "render", "-f", "-")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stdin.Close() }()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Give the process time to install its signal handler; a
			// signal before that would kill it, which the test reports.
			time.Sleep(time.Second)
			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, sent)
			if code != exitInterrupted {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitInterrupted, stderr.String())
			}
			if !strings.Contains(stderr.String(), "render: interrupted") {
				t.Errorf("stderr %q does not say it was interrupted", stderr.String())
			}
			t.Logf("exited %v after %s", took, name)
		})
	}
}

// testRenderDeniesHugeGPUCount renders `nvidia.com/gpu: "1e9"`, which ran
// until killed before the limits: it is denied at once, naming the field and
// the limit.
func testRenderDeniesHugeGPUCount(t *testing.T, bin string) {
	cmd := exec.Command(bin, "render", "-f", filepath.Join("testdata", "render", "gpus-1e9.yaml"), "--no-policies")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, start)
	if code != exitDenied {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitDenied, stderr.String())
	}
	for _, want := range []string{"spec.template.spec.domain.resources.limits[nvidia.com/gpu]", "from 0 to 16", "fix:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not contain %q", stderr.String(), want)
		}
	}
	t.Logf("denied in %v", took)
}
