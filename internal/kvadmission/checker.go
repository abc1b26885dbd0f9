package kvadmission

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Stages at which KubeVirt refuses a VM.
const (
	// StageVM is virt-api's VirtualMachine admission: kubectl apply fails.
	StageVM = "vm"
	// StageVMI is the VirtualMachineInstance virt-controller creates when
	// the VM starts: apply succeeds and the start fails.
	StageVMI = "vmi"
)

// Cause and Verdict are the wire format of `kvadmission check`; the binary
// declares the same types (test/kvadmission/pipeline.go), in a module of its
// own that this one cannot import.

// Cause is one reason KubeVirt gave.
type Cause struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Verdict is KubeVirt's answer for one VM.
type Verdict struct {
	Name     string   `json:"name"`
	Allowed  bool     `json:"allowed"`
	Stage    string   `json:"stage,omitempty"`
	Causes   []Cause  `json:"causes,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// String is the verdict as a test failure shows it.
func (v Verdict) String() string {
	if v.Allowed {
		return "KubeVirt admits " + v.Name
	}
	var b strings.Builder
	fmt.Fprintf(&b, "KubeVirt refuses %s at %s admission:", v.Name, v.Stage)
	for _, c := range v.Causes {
		fmt.Fprintf(&b, " [%s] %s;", c.Field, c.Message)
	}
	return b.String()
}

// Checker judges VMs with one long-running `kvadmission check` process.
// It is safe for concurrent use; checks are serialised.
type Checker struct {
	mu    sync.Mutex // serialises checks
	stdin io.WriteCloser
	out   *bufio.Reader
	cmd   *exec.Cmd

	errMu  sync.Mutex // guards stderr, which exec fills from its own goroutine
	stderr bytes.Buffer
}

// Option configures a Checker.
type Option func(*[]string)

// WithKubeconfig lets KubeVirt look up instancetypes and preferences in the
// API server the kubeconfig file reaches.
func WithKubeconfig(path string) Option {
	return func(args *[]string) { *args = append(*args, "--kubeconfig", path) }
}

// WithFeatureGates adds feature gates to the KubeVirt CR.
func WithFeatureGates(gates ...string) Option {
	return func(args *[]string) { *args = append(*args, "--feature-gates", strings.Join(gates, ",")) }
}

// Start runs a Checker for a cluster whose default architecture is arch
// ("" is KubeVirt's default, amd64) and stops it when the test ends.
func Start(t testing.TB, arch string, opts ...Option) *Checker {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"check"}
	if arch != "" {
		args = append(args, "--default-arch", arch)
	}
	for _, o := range opts {
		o(&args)
	}
	c := &Checker{cmd: exec.Command(bin, args...)}
	c.cmd.Stderr = &lockedWriter{mu: &c.errMu, w: &c.stderr}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = c.stdin.Close()
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("kvadmission check: %v\n%s", err, c.stderrTail())
		}
	})
	return c
}

// Check judges vm as a CREATE.
func (c *Checker) Check(vm *kubevirtv1.VirtualMachine) (Verdict, error) {
	raw, err := json.Marshal(vm)
	if err != nil {
		return Verdict{}, err
	}
	return c.CheckJSON(raw)
}

// CheckJSON judges a VirtualMachine given as JSON, as a CREATE.
func (c *Checker) CheckJSON(raw []byte) (Verdict, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return Verdict{}, fmt.Errorf("not JSON: %w", err)
	}
	compact.WriteByte('\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.stdin.Write(compact.Bytes()); err != nil {
		return Verdict{}, fmt.Errorf("kvadmission check: %w\n%s", err, c.stderrTail())
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return Verdict{}, fmt.Errorf("kvadmission check: %w\n%s", err, c.stderrTail())
	}
	var v Verdict
	if err := json.Unmarshal(line, &v); err != nil {
		return Verdict{}, fmt.Errorf("kvadmission check answered %q: %w", line, err)
	}
	return v, nil
}

func (c *Checker) stderrTail() string {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	s := c.stderr.String()
	if len(s) > 4096 {
		s = "…" + s[len(s)-4096:]
	}
	return s
}

// lockedWriter guards the stderr buffer the process writes while Check
// reads it.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

// maxStderr bounds what a Checker keeps of the process's log.
const maxStderr = 256 << 10

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// KubeVirt logs a line per lookup it ignores; keep the recent part.
	if l.w.Len() > maxStderr {
		tail := append([]byte(nil), l.w.Bytes()[l.w.Len()-maxStderr/2:]...)
		l.w.Reset()
		l.w.Write(tail)
	}
	return l.w.Write(p)
}
