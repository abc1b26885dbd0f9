package sshd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshdPath is absolute because sshd re-executes itself for every connection
// and refuses to start when argv[0] is relative.
const sshdPath = "/usr/sbin/sshd"

// privsepDir is the privilege-separation directory compiled into Debian's
// sshd; it must exist (root-owned, not group or world writable).
const privsepDir = "/run/sshd"

const (
	// startTimeout bounds Start when the caller's ctx has no deadline; sshd
	// is up in tens of milliseconds, the margin is for a loaded machine.
	startTimeout = 15 * time.Second
	// probeTimeout bounds one attempt to read the banner.
	probeTimeout = time.Second
	// probeInterval is the pause between readiness probes.
	probeInterval = 20 * time.Millisecond
	// stopGrace is how long sshd gets to exit after SIGTERM before SIGKILL.
	stopGrace = 3 * time.Second
	// logDrain is how long Stop waits for the last log lines of sessions
	// that are still closing.
	logDrain = 300 * time.Millisecond
	// maxLogLines caps the lines Logs keeps; older ones are dropped.
	maxLogLines = 5000
	// startAttempts is how many free ports Start tries when another process
	// takes the one it picked before sshd binds it.
	startAttempts = 3
)

// Options configure a Server.
type Options struct {
	// Logf receives sshd's stderr, one line a call. Nil discards it
	// (Logs still keeps it). StartTest sets it to t.Logf.
	Logf func(format string, args ...any)
	// NoPassword turns PasswordAuthentication off, as on most cloud images.
	NoPassword bool
}

// Server is a running sshd. Its exported fields are set by Start and, for
// HostKey, by RestartWithNewHostKey; read them from the goroutine that calls
// those.
type Server struct {
	// Addr is 127.0.0.1:port.
	Addr string
	// HostKey is the key the server currently presents.
	HostKey ssh.PublicKey
	// User is the account the server accepts (TestUser).
	User string
	// Password is User's password (see the package doc).
	Password string
	// ClientKey is the public key in the server's authorized_keys.
	ClientKey ssh.PublicKey
	// ClientKeyPEM is ClientKey's private half, an unencrypted OpenSSH PEM.
	ClientKeyPEM []byte

	opts           Options
	dir            string
	port           int
	hostKeyPath    string
	authorizedKeys string

	mu      sync.Mutex
	proc    *process
	readers []*logReader
	logs    []string
	stopped bool
}

// process is one sshd listener process.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// logReader copies one process's stderr pipe into the log. The pipe stays
// open while sessions forked by that process live.
type logReader struct {
	r    *os.File
	done chan struct{}
}

// StartTest starts a Server for t, logs sshd's output to t, fails t when the
// server does not come up, and stops it when t ends.
func StartTest(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop sshd: %v", err)
		}
	})
	return s
}

// Start writes a temp dir with fresh keys and a config and starts sshd,
// returning once it answers with an SSH banner. ctx bounds the start only;
// the server runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	password, err := ensureUser()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(privsepDir, 0o755); err != nil {
		return nil, fmt.Errorf("create sshd privilege-separation dir: %w", err)
	}
	dir, err := os.MkdirTemp("", "virtstation-sshd-")
	if err != nil {
		return nil, err
	}
	// The session runs as TestUser and must be able to reach
	// authorized_keys; sshd reads it with the user's permissions.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		User:           TestUser,
		Password:       password,
		opts:           opts,
		dir:            dir,
		hostKeyPath:    filepath.Join(dir, "ssh_host_ed25519_key"),
		authorizedKeys: filepath.Join(dir, "authorized_keys"),
	}
	if err := s.setUp(ctx); err != nil {
		_ = s.Stop() // the setup error is the one to report
		return nil, err
	}
	return s, nil
}

func (s *Server) setUp(ctx context.Context) error {
	clientKey, clientPEM, err := newKey(TestUser + "@virtstation-test")
	if err != nil {
		return err
	}
	s.ClientKey, s.ClientKeyPEM = clientKey, clientPEM
	if err := os.WriteFile(s.authorizedKeys, ssh.MarshalAuthorizedKey(clientKey), 0o644); err != nil {
		return err
	}
	if err := s.newHostKey(); err != nil {
		return err
	}
	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return err
		}
		if err := s.launch(ctx, port); err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return nil
	}
	return lastErr
}

// AddAuthorizedKey appends key to the server's authorized_keys; sshd reads
// the file on every login, so it takes effect at once.
func (s *Server) AddAuthorizedKey(key ssh.PublicKey) error {
	f, err := os.OpenFile(s.authorizedKeys, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(ssh.MarshalAuthorizedKey(key)); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// RestartWithNewHostKey stops sshd, replaces its host key with a new one and
// starts it again on the same address. Sessions already open stay up.
func (s *Server) RestartWithNewHostKey(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
	if err := s.newHostKey(); err != nil {
		return err
	}
	return s.launch(ctx, s.port)
}

// Logs returns the lines sshd has written so far, oldest first.
func (s *Server) Logs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.logs...)
}

// Stop stops sshd and removes the temp dir. It is safe to call twice.
func (s *Server) Stop() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
	s.mu.Lock()
	readers := s.readers
	s.mu.Unlock()
	drain := time.NewTimer(logDrain)
	defer drain.Stop()
	for _, r := range readers {
		select {
		case <-r.done:
		case <-drain.C:
		}
	}
	s.mu.Lock()
	s.stopped = true
	s.readers = nil
	s.mu.Unlock()
	for _, r := range readers {
		_ = r.r.Close() // the reader goroutine ends on the error
	}
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	return err
}

// newHostKey writes a fresh host key and records its public half.
func (s *Server) newHostKey() error {
	pub, priv, err := newKey("virtstation-test-host")
	if err != nil {
		return err
	}
	// sshd refuses host keys that others can read.
	if err := os.WriteFile(s.hostKeyPath+".tmp", priv, 0o600); err != nil {
		return err
	}
	if err := os.Rename(s.hostKeyPath+".tmp", s.hostKeyPath); err != nil {
		return err
	}
	s.HostKey = pub
	return nil
}

// launch writes the config for port, starts sshd and waits for its banner.
func (s *Server) launch(ctx context.Context, port int) error {
	cfgPath := filepath.Join(s.dir, "sshd_config")
	cfg := renderConfig(configParams{
		Port:           port,
		HostKey:        s.hostKeyPath,
		PidFile:        filepath.Join(s.dir, "sshd.pid"),
		AuthorizedKeys: s.authorizedKeys,
		Password:       !s.opts.NoPassword,
	})
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfgPath)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return fmt.Errorf("start %s: %w", sshdPath, err)
	}
	_ = pw.Close() // sshd holds the write end now
	r := &logReader{r: pr, done: make(chan struct{})}
	s.mu.Lock()
	s.readers = append(s.readers, r)
	s.mu.Unlock()
	go s.copyLog(r)

	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(ctx, addr, p); err != nil {
		p.stop()
		logs := s.Logs()
		logs = logs[max(0, len(logs)-20):]
		return fmt.Errorf("sshd on %s did not come up: %w (log: %s)", addr, err, strings.Join(logs, " | "))
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	s.port, s.Addr = port, addr
	return nil
}

// copyLog forwards sshd's output line by line until the pipe closes or Stop
// closes it.
func (s *Server) copyLog(r *logReader) {
	defer close(r.done)
	sc := bufio.NewScanner(r.r)
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		if !s.stopped {
			if len(s.logs) >= maxLogLines {
				s.logs = s.logs[1:]
			}
			s.logs = append(s.logs, line)
			if s.opts.Logf != nil {
				s.opts.Logf("sshd: %s", line)
			}
		}
		s.mu.Unlock()
	}
}

// waitReady polls addr until it answers with an SSH banner, sshd exits, or
// ctx ends.
func waitReady(ctx context.Context, addr string, p *process) error {
	for {
		if banner(addr) {
			return nil
		}
		select {
		case <-p.exited:
			if p.err == nil {
				return errors.New("sshd exited with status 0")
			}
			return fmt.Errorf("sshd exited: %w", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeInterval):
		}
	}
}

// banner reports whether addr answers with an SSH-2.0 identification line.
func banner(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()                // only probing
	_ = c.SetDeadline(time.Now().Add(probeTimeout)) // a failed read reports it
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the exit.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.cmd.Process.Kill() // the process may have exited already
	}
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill() // as above
		<-p.exited
	}
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before sshd binds it; Start then tries another.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }() // only asking for a port
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("free port: listener address %v is not TCP", l.Addr())
	}
	return addr.Port, nil
}
