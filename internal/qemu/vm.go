package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtstation/virtstation/internal/proc"
)

// Binary is the emulator Start runs (Debian package qemu-system-x86).
const Binary = "qemu-system-x86_64"

// startTimeout bounds QEMU's start-up and the guest's boot. TCG boots SeaBIOS
// and the boot sector in about a second on an idle core; a loaded 2-core CI
// machine can take many times that.
const startTimeout = 60 * time.Second

// pollInterval is how often Start retries a socket QEMU has not created yet.
const pollInterval = 20 * time.Millisecond

// maxSocketPath is the longest unix socket path the kernel accepts (sun_path
// is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// diskSize pads the boot image: SeaBIOS wants a disk of a plausible size, not
// a single sector.
const diskSize = 64 << 10

// rfbVersion is the greeting QEMU's VNC server sends first.
const rfbVersion = "RFB 003.008\n"

// VM is a running QEMU. Its fields are read-only; Stop may be called from any
// goroutine, more than once.
type VM struct {
	// VNCSocket is QEMU's VNC server (RFB 3.8), like virt-launcher's virt-vnc.
	VNCSocket string
	// SerialSocket is the guest's COM1, like virt-launcher's virt-serial0.
	// One client at a time; see the package documentation.
	SerialSocket string
	// QMPSocket is QEMU's monitor (QMP), where virt-launcher's libvirt
	// takes screenshots; see Screendump. One client at a time.
	QMPSocket string

	process  *proc.Process
	output   *proc.Output
	files    []string
	stopOnce sync.Once
	stopErr  error
}

// Guest is the program a VM boots.
type Guest int

const (
	// Echo answers on the serial line (see the package documentation); its
	// screen is the BIOS's still text screen.
	Echo Guest = iota
	// MovingScreen repaints the whole VGA screen 18 times a second (see
	// movingCode) and writes FrameMark on the serial line after each
	// repaint.
	MovingScreen
)

func (g Guest) String() string {
	switch g {
	case Echo:
		return "echo"
	case MovingScreen:
		return "moving screen"
	}
	return fmt.Sprintf("Guest(%d)", int(g))
}

// Options choose what StartWith runs; the zero value is Start's.
type Options struct {
	// Guest is the boot sector; Echo by default.
	Guest Guest
	// LossyVNC adds lossy=on to the VNC display, which lets QEMU send JPEG
	// in Tight rectangles. KubeVirt does not set it: only tests that show
	// the difference should.
	LossyVNC bool
}

// Start writes the echo guest into dir, starts QEMU on it and returns once
// both sockets accept connections and the guest has written its Banner.
// QEMU runs until Stop, or until ctx is done. dir must be short enough for
// unix socket paths (about 90 bytes).
func Start(ctx context.Context, dir string) (*VM, error) {
	return StartWith(ctx, dir, Options{})
}

// StartWith is Start with a choice of guest and display. It returns once
// the guest is running: for Echo when its Banner arrives, for MovingScreen
// when its first FrameMark does.
func StartWith(ctx context.Context, dir string, opts Options) (*VM, error) {
	sector, err := opts.Guest.sector()
	if err != nil {
		return nil, err
	}
	vm := &VM{
		VNCSocket:    filepath.Join(dir, "vnc.sock"),
		SerialSocket: filepath.Join(dir, "serial.sock"),
		QMPSocket:    filepath.Join(dir, "qmp.sock"),
		output:       &proc.Output{},
	}
	if len(vm.SerialSocket) > maxSocketPath {
		return nil, fmt.Errorf("qemu: directory %q is too long for unix socket paths (at most %d bytes with the socket name)", dir, maxSocketPath)
	}
	image := filepath.Join(dir, "boot.img")
	if err := writeImage(image, sector); err != nil {
		return nil, err
	}
	vm.files = []string{image, vm.VNCSocket, vm.SerialSocket, vm.QMPSocket}

	vnc := "unix:" + vm.VNCSocket
	if opts.LossyVNC {
		vnc += ",lossy=on"
	}
	cmd := exec.CommandContext(ctx, Binary, commandLine(image, vnc, vm.SerialSocket, vm.QMPSocket)...)
	cmd.Stdout, cmd.Stderr = vm.output, vm.output
	// QEMU must not outlive a test binary that dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if vm.process, err = proc.Start(cmd); err != nil {
		_ = os.Remove(image)
		return nil, fmt.Errorf("start %s (Debian package qemu-system-x86): %w", Binary, err)
	}

	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := vm.waitReady(sctx, opts.Guest); err != nil {
		return nil, errors.Join(err, vm.Stop())
	}
	return vm, nil
}

// commandLine is QEMU as the design fixes it: TCG, no default devices, a
// standard VGA behind a VNC unix socket, COM1 on a unix socket server, plus
// the boot image and a small memory, and the QMP monitor on a unix socket
// server (libvirt's channel to QEMU). vnc is the -vnc option's value.
func commandLine(image, vnc, serialSocket, qmpSocket string) []string {
	return []string{
		"-nodefaults",
		"-machine", "accel=tcg",
		"-m", "32",
		"-display", "none",
		"-vga", "std",
		"-vnc", vnc,
		"-serial", "unix:" + serialSocket + ",server=on,wait=off",
		"-qmp", "unix:" + qmpSocket + ",server=on,wait=off",
		"-drive", "file=" + image + ",format=raw,if=ide",
	}
}

// sector is the guest's 512-byte boot sector.
func (g Guest) sector() ([]byte, error) {
	switch g {
	case Echo:
		return bootSector(), nil
	case MovingScreen:
		return movingSector(), nil
	}
	return nil, fmt.Errorf("qemu: unknown guest %v", g)
}

// writeImage writes the boot sector, padded to diskSize, to path.
func writeImage(path string, sector []byte) error {
	img := make([]byte, diskSize)
	copy(img, sector)
	if err := os.WriteFile(path, img, 0o600); err != nil {
		return fmt.Errorf("qemu: write boot image: %w", err)
	}
	return nil
}

// waitReady waits for the VNC greeting and for the guest's sign of life on
// the serial line: the echo guest's banner, the moving guest's frame mark.
func (vm *VM) waitReady(ctx context.Context, g Guest) error {
	vnc, err := vm.dial(ctx, vm.VNCSocket)
	if err != nil {
		return err
	}
	got, err := readUntil(ctx, vnc, rfbVersion)
	_ = vnc.Close()
	if err != nil {
		return fmt.Errorf("qemu: no RFB greeting on %s (got %q): %w%s", vm.VNCSocket, got, err, vm.outputSuffix())
	}
	ready := Banner
	if g == MovingScreen {
		ready = string(FrameMark)
	}
	serial, err := vm.dial(ctx, vm.SerialSocket)
	if err != nil {
		return err
	}
	got, err = readUntil(ctx, serial, ready)
	_ = serial.Close()
	if err != nil {
		return fmt.Errorf("qemu: the %s guest did not write %q on %s (got %q): %w%s", g, ready, vm.SerialSocket, got, err, vm.outputSuffix())
	}
	return nil
}

// dial connects to a unix socket QEMU is about to create.
func (vm *VM) dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			return conn, nil
		}
		select {
		case <-vm.process.Exited():
			return nil, fmt.Errorf("qemu exited before %s accepted connections%s", path, vm.outputSuffix())
		case <-ctx.Done():
			return nil, fmt.Errorf("qemu: %s: %w (last error: %w)%s", path, ctx.Err(), err, vm.outputSuffix())
		case <-time.After(pollInterval):
		}
	}
}

// readUntil reads conn until the data read contains want, or ctx ends.
func readUntil(ctx context.Context, conn net.Conn, want string) (string, error) {
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetReadDeadline(deadline); err != nil {
			return "", err
		}
	}
	var got []byte
	buf := make([]byte, 256)
	for !bytes.Contains(got, []byte(want)) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return string(got), err
		}
	}
	return string(got), nil
}

// Stop kills QEMU, waits for it to exit and removes the files Start wrote.
func (vm *VM) Stop() error {
	vm.stopOnce.Do(func() {
		if err := vm.process.Kill(); err != nil {
			vm.stopErr = fmt.Errorf("kill qemu: %w", err)
		}
		for _, f := range vm.files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				vm.stopErr = errors.Join(vm.stopErr, err)
			}
		}
	})
	return vm.stopErr
}

// outputSuffix is QEMU's own output, for error messages.
func (vm *VM) outputSuffix() string {
	out := strings.TrimSpace(vm.output.String())
	if out == "" {
		return ""
	}
	return "; qemu said: " + out
}
