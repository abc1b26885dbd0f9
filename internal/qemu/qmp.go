package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

// maxQMPLine bounds one line QEMU's monitor sends: replies and events are
// small JSON objects.
const maxQMPLine = 64 << 10

// maxScreendump bounds the PNG read back: QEMU's 720x400 text screen is a
// few kilobytes, a 4K framebuffer uncompressed would be about 25 MB.
const maxScreendump = 64 << 20

// Screendump asks the QEMU whose QMP monitor listens on socket for a PNG of
// its primary display, with the QMP command screendump (format "png", QEMU
// 7.1 and later), as libvirt's virDomainScreenshot does for virt-launcher.
// QEMU writes the file itself, into a temporary directory; Screendump reads
// it back and removes it. The monitor serves one client at a time, so
// concurrent calls queue. ctx bounds the whole exchange.
func Screendump(ctx context.Context, socket string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "qemu-screendump-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "screen.png")

	m, err := dialQMPRetrying(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer func() { _ = m.Close() }()
	if err := m.execute("screendump", map[string]string{"filename": file, "format": "png"}); err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("qemu: read the screendump: %w", err)
	}
	defer func() { _ = f.Close() }()
	png, err := io.ReadAll(io.LimitReader(f, maxScreendump+1))
	if err != nil {
		return nil, fmt.Errorf("qemu: read the screendump: %w", err)
	}
	if len(png) > maxScreendump {
		return nil, fmt.Errorf("qemu: screendump larger than %d bytes", maxScreendump)
	}
	return png, nil
}

// qmp is one session with QEMU's monitor, in command mode. Not safe for
// concurrent use: QMP answers commands in order, one line each.
type qmp struct {
	conn net.Conn
	r    *bufio.Reader
	stop func() bool // unregisters the close on ctx
}

// dialQMP connects, reads QEMU's greeting and leaves capability
// negotiation with qmp_capabilities, as every QMP client must.
func dialQMP(ctx context.Context, socket string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("qemu: dial QMP: %w", err)
	}
	// A done ctx closes the connection, which ends any read or write.
	m := &qmp{conn: conn, r: newQMPReader(conn)}
	m.stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	err = m.readLine(&greeting)
	// A JSON line before the greeting is output the monitor still held for
	// the client before (a reply or an event): a second screendump right
	// after the first read one in CI. It is skipped, a few at most.
	for i := 0; i < maxStaleLines && err == nil && greeting.QMP == nil; i++ {
		err = m.readLine(&greeting)
	}
	if err != nil || greeting.QMP == nil {
		_ = m.Close()
		if errors.Is(err, io.EOF) && m.r.Buffered() == 0 {
			return nil, errDropped
		}
		return nil, fmt.Errorf("%w: %w", errNoGreeting, errors.Join(err, ctx.Err(), io.ErrUnexpectedEOF))
	}
	if err := m.execute("qmp_capabilities", nil); err != nil {
		_ = m.Close()
		return nil, errors.Join(err, ctx.Err())
	}
	return m, nil
}

// maxStaleLines bounds the JSON lines skipped before QEMU's greeting.
const maxStaleLines = 8

// errNoGreeting: what answered is not QEMU's monitor.
var errNoGreeting = errors.New("qemu: no QMP greeting")

// errDropped: QEMU closed the connection before a byte of its greeting. The
// monitor serves one client at a time, and a client that connects while it
// is still letting the previous one go is dropped: dial again.
var errDropped = fmt.Errorf("%w: the monitor closed the connection at once", errNoGreeting)

// qmpRedialEvery spaces the dials of dialQMPRetrying.
const qmpRedialEvery = 20 * time.Millisecond

// dialQMPRetrying is dialQMP, dialled again while QEMU drops the
// connection before a byte of its greeting (errDropped), until ctx ends.
func dialQMPRetrying(ctx context.Context, socket string) (*qmp, error) {
	for {
		m, err := dialQMP(ctx, socket)
		if !errors.Is(err, errDropped) || ctx.Err() != nil {
			return m, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(qmpRedialEvery):
		}
	}
}

// newQMPReader buffers the monitor's output; a line must fit the buffer.
func newQMPReader(conn net.Conn) *bufio.Reader { return bufio.NewReaderSize(conn, maxQMPLine) }

// Close ends the session.
func (m *qmp) Close() error {
	m.stop()
	return m.conn.Close()
}

// qmpReply is a line from the monitor: a command's return or error, or an
// asynchronous event, which execute skips.
type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

// execute runs one command and waits for its reply.
func (m *qmp) execute(command string, arguments any) error {
	req := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{command, arguments}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := m.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("qemu: QMP %s: %w", command, err)
	}
	for {
		var reply qmpReply
		if err := m.readLine(&reply); err != nil {
			return fmt.Errorf("qemu: QMP %s: %w", command, err)
		}
		switch {
		case reply.Error != nil:
			return fmt.Errorf("qemu: QMP %s: %s: %s", command, reply.Error.Class, reply.Error.Desc)
		case reply.Return != nil:
			return nil
		}
		// An event: keep reading.
	}
}

// readLine decodes the next line of the monitor's output into v.
func (m *qmp) readLine(v any) error {
	line, err := m.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("QMP line longer than %d bytes", m.r.Size())
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// Powerdown presses the ACPI power button of the QEMU whose QMP monitor
// listens on socket (system_powerdown), as libvirt's graceful shutdown
// does for virt-launcher; the guest then shuts down on its own.
func Powerdown(ctx context.Context, socket string) error {
	m, err := dialQMPRetrying(ctx, socket)
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	return m.execute("system_powerdown", nil)
}
