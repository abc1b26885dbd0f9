package browser

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/virtstation/virtstation/internal/proc"
	"github.com/virtstation/virtstation/internal/testenv"
)

// ChromiumPath is Debian's package chromium.
const ChromiumPath = "/usr/bin/chromium"

// driverReplyTimeout bounds one driver command; the driver's own waits
// time out sooner (30 s) and answer with an error.
const driverReplyTimeout = 75 * time.Second

// stopTimeout bounds Chromium's orderly close once the driver's stdin
// closes; after it the process group is killed.
const stopTimeout = 10 * time.Second

// Browser is a running driver.mjs with one Chromium. Commands are sent one
// at a time; it is not safe for concurrent use.
type Browser struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	replies   chan driverReply
	stderr    *proc.Output // the driver's stderr, for failure messages
	next      int
	artifacts string
}

// driverReply is one line the driver writes: the value of command ID, or
// its error.
type driverReply struct {
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// Start starts the driver and Chromium; both end when the test does. It
// fails the test when chromium or playwright-core is missing.
func Start(t *testing.T) *Browser {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "test", "bridge", "browser")
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium (apt-get install chromium)", ChromiumPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is missing: run npm ci in %s", dir)
	}
	artifacts := os.Getenv("VIRTSTATION_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(dir, "artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("node", filepath.Join(dir, "driver.mjs"))
	cmd.Dir = dir
	// Chromium's fresh profile goes to this test's temporary directory.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "CHROMIUM="+ChromiumPath)
	// Its own process group, so Chromium can be ended with the driver; and
	// the driver dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	b := &Browser{cmd: cmd, replies: make(chan driverReply), stderr: &proc.Output{}, artifacts: artifacts}
	cmd.Stderr = b.stderr
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node (Debian's nodejs): %v", err)
	}
	go func() {
		defer close(b.replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			var r driverReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = driverReply{ID: -1, Error: "driver wrote " + sc.Text()}
			}
			b.replies <- r
		}
	}()
	t.Cleanup(b.stop)
	return b
}

// stop closes the driver's stdin, which closes Chromium, and kills the
// process group if that takes too long.
func (b *Browser) stop() {
	_ = b.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range b.replies {
			// drain until the driver exits
		}
		_ = b.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Call sends one command to the driver (op and its arguments, as
// driver.mjs names them) and returns its value.
func (b *Browser) Call(op string, args map[string]any) (json.RawMessage, error) {
	b.next++
	cmd := map[string]any{"id": b.next, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	line, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("driver gone: %w\n%s", err, b.stderr.String())
	}
	select {
	case r, ok := <-b.replies:
		switch {
		case !ok:
			return nil, fmt.Errorf("driver exited\n%s", b.stderr.String())
		case r.ID != b.next:
			return nil, fmt.Errorf("driver answered %d to %d: %s", r.ID, b.next, r.Error)
		case r.Error != "":
			return nil, errors.New(r.Error)
		}
		return r.Value, nil
	case <-time.After(driverReplyTimeout):
		return nil, fmt.Errorf("driver did not answer %s in %v\n%s", op, driverReplyTimeout, b.stderr.String())
	}
}
