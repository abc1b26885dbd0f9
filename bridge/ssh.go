package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/sshbridge"
)

// sshReadChunk is how much guest output one client message carries at most.
const sshReadChunk = 32 << 10

// openSSH reads the client's hello, opens SSH to the guest, and returns the
// SSH side as a relay endpoint plus the filter that turns client messages
// into keystrokes and window changes. On failure it closes the client and
// returns the Ending it closed with.
func (s *Server) openSSH(ctx context.Context, client *relay.WS, tgt target, log logr.Logger) (relay.Endpoint, relay.ClientFilter, *relay.Ending) {
	hello, end := readHello(client)
	if end != nil {
		// The hello's reader may still be reading: close without draining.
		_ = client.Close(end.Code, end.Reason)
		return nil, nil, end
	}
	up, filter, end := s.dialSSH(ctx, hello, tgt, log)
	if end != nil {
		_ = client.CloseAndDrain(end.Code, end.Reason)
	}
	return up, filter, end
}

// dialSSH opens SSH to the guest, at its launcher pod's address, with the
// client's hello.
func (s *Server) dialSSH(ctx context.Context, hello sshbridge.Hello, tgt target, log logr.Logger) (relay.Endpoint, relay.ClientFilter, *relay.Ending) {
	// The launcher pod's address, never one the guest reports (launcher.go).
	addr, err := findLauncher(ctx, s.deps.Reader, tgt.VMI)
	switch {
	case errors.Is(err, ErrNoLauncher):
		return nil, nil, &relay.Ending{Code: relay.CodeSSHUnreachable, Reason: "the VM's virt-launcher pod has no address yet; try again once it runs"}
	case err != nil:
		log.Error(err, "find the launcher pod")
		return nil, nil, &relay.Ending{Code: relay.CodeUpstreamClosed, Reason: "could not find the VM's pod; try again"}
	}
	ref := sshbridge.VMRef{Namespace: tgt.VMI.Namespace, Name: tgt.VMI.Name}
	if tgt.VM != nil {
		ref.UID = tgt.VM.UID
	}
	sess, err := sshbridge.Dial(ctx, sshbridge.DialOptions{
		Addr:     net.JoinHostPort(addr.String(), strconv.Itoa(s.opts.SSHPort)),
		Hello:    &hello,
		VM:       ref,
		HostKeys: s.deps.HostKeys,
	})
	if err != nil {
		end := sshEnding(err)
		log.Info("SSH refused", "code", end.Code, "error", err.Error())
		return nil, nil, &end
	}
	filter := func(kind int, p []byte) ([]byte, bool, error) {
		if kind == websocket.TextMessage {
			if rs, err := sshbridge.ParseControl(p); err == nil {
				if err := sess.Resize(rs.Cols, rs.Rows); err != nil {
					return nil, false, &relay.EndingError{Ending: relay.Ending{Code: relay.CodeUpstreamClosed, Reason: "the SSH connection closed"}}
				}
				return nil, false, nil
			}
		}
		return p, true, nil
	}
	return &sshEndpoint{sess: sess, buf: make([]byte, sshReadChunk)}, filter, nil
}

// readHello waits for the first message, the SSH hello.
func readHello(client *relay.WS) (sshbridge.Hello, *relay.Ending) {
	type result struct {
		kind int
		p    []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		kind, p, err := client.ReadMessage()
		got <- result{kind, p, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			return sshbridge.Hello{}, &relay.Ending{Code: relay.CodeNormal, Reason: "client left before the SSH hello"}
		}
		h, err := sshbridge.ParseHello(r.p)
		if err != nil {
			return sshbridge.Hello{}, &relay.Ending{Code: relay.CodeBadHello, Reason: err.Error()}
		}
		return h, nil
	case <-time.After(sshHelloTimeout):
		return sshbridge.Hello{}, &relay.Ending{Code: relay.CodeBadHello, Reason: "no SSH hello within " + sshHelloTimeout.String()}
	}
}

// sshEnding is the close frame for an SSH dial error.
func sshEnding(err error) relay.Ending {
	switch {
	case errors.Is(err, sshbridge.ErrHostKeyChanged):
		return relay.Ending{Code: relay.CodeSSHHostKeyChanged, Reason: "the VM's SSH host key changed since first use; refused (ask an admin to reset the pin)"}
	case errors.Is(err, sshbridge.ErrAuthFailed):
		return relay.Ending{Code: relay.CodeSSHAuthFailed, Reason: "the guest refused the user name, key or password"}
	case errors.Is(err, sshbridge.ErrUnreachable):
		return relay.Ending{Code: relay.CodeSSHUnreachable, Reason: "the guest is not answering on port 22"}
	case errors.Is(err, sshbridge.ErrBadHello):
		return relay.Ending{Code: relay.CodeBadHello, Reason: err.Error()}
	}
	return relay.Ending{Code: relay.CodeUpstreamClosed, Reason: "the SSH connection failed"}
}

// sshEndpoint is an SSH shell as a relay endpoint: output becomes binary
// messages, messages become keystrokes. Relay gives it one reader and one
// writer.
type sshEndpoint struct {
	sess *sshbridge.Session
	buf  []byte
}

func (e *sshEndpoint) ReadMessage() (int, []byte, error) {
	n, err := e.sess.Output.Read(e.buf)
	if n > 0 {
		// The relay writes p before the next read, so reusing buf is safe.
		return websocket.BinaryMessage, e.buf[:n], nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return 0, nil, err
}

func (e *sshEndpoint) WriteMessage(_ int, p []byte) error {
	_, err := e.sess.Stdin.Write(p)
	return err
}

func (e *sshEndpoint) Close(int, string) error { return e.sess.Close() }
