package sshbridge

import (
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

const (
	// termType is what the browser client (xterm.js) emulates.
	termType = "xterm-256color"
	// ttySpeed is the nominal line speed reported to the guest; programs
	// only use it to pick padding and a redraw strategy.
	ttySpeed = 38400
)

// Session is a login shell on a PTY in the guest.
//
// Concurrency: one goroutine writes Stdin, one reads Output; Resize, Wait
// and Close may be called from any goroutine, Close more than once. Output
// must be read until it returns an error, or the Session closed, or the
// guest's output backs up and the shell stalls.
type Session struct {
	// Stdin is the terminal's input. Closing it sends EOF to the guest.
	Stdin io.WriteCloser
	// Output is the terminal's output (with a PTY the guest merges stdout
	// and stderr; anything sent as stderr is merged here too). It returns
	// io.EOF after the shell exits, io.ErrClosedPipe after Close.
	Output io.Reader

	client *ssh.Client
	sess   *ssh.Session
	out    *io.PipeReader
	outW   *io.PipeWriter

	done      chan struct{}
	waitErr   error
	closeOnce sync.Once
}

// startShell opens a session channel, asks for a PTY of cols x rows and
// starts the user's login shell.
func startShell(client *ssh.Client, cols, rows int) (*Session, error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("open an ssh session on the guest: %w", err)
	}
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: ttySpeed, ssh.TTY_OP_OSPEED: ttySpeed}
	if err := sess.RequestPty(termType, rows, cols, modes); err != nil {
		_ = sess.Close() // the refusal is the error to report
		return nil, fmt.Errorf("the guest refused a terminal: %w", err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	out, outW := io.Pipe()
	sess.Stdout, sess.Stderr = outW, outW // io.Pipe serialises the two copiers
	if err := sess.Shell(); err != nil {
		_ = sess.Close()
		return nil, fmt.Errorf("the guest refused to start a shell: %w", err)
	}
	s := &Session{
		Stdin:  stdin,
		Output: out,
		client: client,
		sess:   sess,
		out:    out,
		outW:   outW,
		done:   make(chan struct{}),
	}
	go s.wait()
	return s, nil
}

// wait ends the session when the shell does: Output then drains to EOF.
func (s *Session) wait() {
	err := s.sess.Wait()
	_ = s.outW.Close()   // always nil
	_ = s.client.Close() // the session is over; a failed close changes nothing
	s.waitErr = err
	close(s.done)
}

// Resize tells the guest the terminal is now cols x rows (SSH
// window-change). Sizes outside 1..MaxDimension are refused with
// ErrBadControl.
func (s *Session) Resize(cols, rows int) error {
	if err := validateSize(cols, rows); err != nil {
		return fmt.Errorf("%w: %w", ErrBadControl, err)
	}
	return s.sess.WindowChange(rows, cols)
}

// Wait blocks until the session ends and returns why: nil when the shell
// exited with status 0, an *ssh.ExitError for another status, and another
// error (such as *ssh.ExitMissingError) when the connection ended without
// an exit status, which includes Close.
func (s *Session) Wait() error {
	<-s.done
	return s.waitErr
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Close ends the session and the connection. Pending Output reads return
// io.ErrClosedPipe. It returns nil; calling it again does nothing.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.out.CloseWithError(io.ErrClosedPipe)
		_ = s.sess.Close()   // the channel may be gone already
		_ = s.client.Close() // as may the connection
	})
	return nil
}
