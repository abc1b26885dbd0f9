package relay

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
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100
// on every Linux architecture Go supports.
const userHZ = 100

// startTimeout bounds a proxy's start.
const startTimeout = 15 * time.Second

// Proc is a proxy running as its own process, so that its CPU can be read
// alone.
type Proc struct {
	Name string
	Addr string // host:port it listens on
	cmd  *exec.Cmd
	// Lines are the lines it prints after "listening on" (vncbridge's
	// session lines); nil for websockify.
	Lines <-chan string
}

// StartListener starts a program that prints "listening on HOST:PORT" as
// its first line, then sends each further line to Lines.
func StartListener(ctx context.Context, name, bin string, args ...string) (*Proc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	sc := bufio.NewScanner(out)
	addr := make(chan string, 1)
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		first := true
		for sc.Scan() {
			if first {
				addr <- strings.TrimPrefix(sc.Text(), "listening on ")
				first = false
				continue
			}
			select {
			case lines <- sc.Text():
			default: // nobody reads them: drop
			}
		}
		if first {
			close(addr)
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			_ = cmd.Wait()
			return nil, fmt.Errorf("%s exited before listening", name)
		}
		return &Proc{Name: name, Addr: a, cmd: cmd, Lines: lines}, nil
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s did not listen within %s", name, startTimeout)
	}
}

// StartWebsockify starts Debian's websockify in its default mode (a forked
// handler process per connection) from a free loopback port to target, and
// waits until it accepts connections.
func StartWebsockify(ctx context.Context, target string) (*Proc, error) {
	bin, err := exec.LookPath("websockify")
	if err != nil {
		return nil, fmt.Errorf("websockify is not installed (apt-get install websockify): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.CommandContext(ctx, bin, addr, target)
	cmd.Stdout, cmd.Stderr = nil, nil // it logs every connection
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start websockify: %w", err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return &Proc{Name: "websockify", Addr: addr, cmd: cmd}, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("websockify did not listen within %s: %w", startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopGrace is how long a proxy has to exit after SIGTERM (vncbridge
// writes its CPU profile) before it is killed.
const stopGrace = 5 * time.Second

// Stop ends the process it started (and, for websockify, its handlers
// exit with their connections): SIGTERM, then SIGKILL after stopGrace.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.AfterFunc(stopGrace, func() { _ = p.cmd.Process.Kill() })
	_ = p.cmd.Wait()
	t.Stop()
}

// CPU is the user+system time of the process and of its live descendants
// (websockify's per-connection handlers).
func (p *Proc) CPU() (time.Duration, error) { return treeCPU(p.cmd.Process.Pid) }

// SelfCPU is this process's user+sys time: the source, the client and the
// upstream stand-in (websockify and the proxies are processes of their
// own).
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("free port: listener address %v is not TCP", ln.Addr())
	}
	return addr.Port, nil
}

// treeCPU sums utime+stime over root and every live process below it.
func treeCPU(root int) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, f := range stats {
		pid, ppid, t, err := readStat(f)
		if err != nil {
			continue // the process ended meanwhile
		}
		parent[pid], ticks[pid] = ppid, t
	}
	if _, ok := ticks[root]; !ok {
		return 0, fmt.Errorf("process %d is gone", root)
	}
	var sum int64
	for pid, t := range ticks {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				sum += t
				break
			}
		}
	}
	return time.Duration(sum) * time.Second / userHZ, nil
}

// readStat returns a /proc/<pid>/stat's pid, ppid and utime+stime. The
// command name (field 2) may hold spaces, so fields count from its ')'.
func readStat(file string) (pid, ppid int, ticks int64, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0, 0, 0, errors.New("malformed stat")
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return 0, 0, 0, err
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, 0, errors.New("short stat")
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, 0, err
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, 0, err
	}
	return pid, ppid, utime + stime, nil
}
