package idle_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"time"
)

// websockifyStartTimeout bounds websockify's start (a Python interpreter).
const websockifyStartTimeout = 15 * time.Second

// websockifyProc is Debian's websockify in its default mode: a listener
// that forks a handler process for each connection.
type websockifyProc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
}

// startWebsockify runs websockify from a free loopback port to target and
// waits until it accepts connections.
func startWebsockify(ctx context.Context, target string) (*websockifyProc, error) {
	bin, err := exec.LookPath("websockify")
	if err != nil {
		return nil, fmt.Errorf("websockify is not installed (make test-deps, or apt-get install -y --no-install-recommends websockify): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, addr, target)
	cmd.Stdout, cmd.Stderr = nil, nil // it logs every connection
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start websockify: %w", err)
	}
	p := &websockifyProc{cmd: cmd, addr: addr, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(websockifyStartTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("websockify did not listen within %v: %w", websockifyStartTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *websockifyProc) pid() int { return p.cmd.Process.Pid }

// stop ends the listener (its handlers end with their connections):
// SIGTERM, then SIGKILL after a grace.
func (p *websockifyProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// websockifyDialer opens idle sessions through websockify, offering the
// binary subprotocol as noVNC does.
func websockifyDialer(addr string) func(context.Context, int) (*wsClient, error) {
	return func(ctx context.Context, _ int) (*wsClient, error) {
		return dialSession(ctx, "ws://"+addr+"/", nil, []string{"binary"}, nil)
	}
}
