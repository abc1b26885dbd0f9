package proc

import (
	"errors"
	"os"
	"os/exec"
)

// Process is a started command that one goroutine waits for. Exited and Kill
// may be called from any goroutine.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has returned
}

// Start starts cmd and waits for it in the background. Its exit status is
// not kept: for the programs the rigs run, killed or not, it says nothing
// their output does not. cmd must not use StdoutPipe or StderrPipe, which
// Wait closes.
func Start(cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited and cmd.ProcessState is set.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// State is the exited process's state; nil before Exited is closed.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the process to exit. A process that has
// exited already is no error.
func (p *Process) Kill() error {
	err := p.cmd.Process.Kill()
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	<-p.exited
	return err
}
