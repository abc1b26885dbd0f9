package virtlauncher

import (
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

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/proc"
	"github.com/virtstation/virtstation/internal/qemu"
)

// Options say where Start finds and puts things.
type Options struct {
	// Client reads the VMI's Secrets, DataVolumes and PVCs.
	Client client.Reader
	// Image is the guest image a containerDisk becomes (FindImage).
	Image Image
	// Dir receives the sockets and per-boot files; short enough for unix
	// socket paths (about 80 bytes).
	Dir string
	// Storage holds the claims' image files (ClaimImage), kept across boots.
	Storage string
	// SSHAddr is the loopback host:port the guest's port 22 is forwarded to.
	SSHAddr string
}

// Machine is a booted VMI. Stop or Shutdown ends it.
type Machine struct {
	// VNCSocket, SerialSocket and QMPSocket are what virt-handler pipes
	// the VMI's vnc, console and screenshot subresources to.
	VNCSocket, SerialSocket, QMPSocket string
	// AgentSocket is the guest agent's channel (see SetAuthorizedKeys).
	AgentSocket string
	// SerialLog holds everything the guest wrote on its serial console.
	SerialLog string
	// SSHAddr reaches the guest's port 22.
	SSHAddr string
	// Args is QEMU's command line (Domain's), for failure messages.
	Args []string

	process  *proc.Process
	output   *proc.Output
	stopOnce sync.Once
	stopErr  error
}

// Start presents vmi to a new QEMU (see Domain) and returns once QEMU
// serves its sockets; the guest boots on (WaitSerial waits for it).
func Start(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, o Options) (*Machine, error) {
	m := &Machine{
		VNCSocket:    filepath.Join(o.Dir, "vnc.sock"),
		SerialSocket: filepath.Join(o.Dir, "serial.sock"),
		QMPSocket:    filepath.Join(o.Dir, "qmp.sock"),
		AgentSocket:  filepath.Join(o.Dir, "agent.sock"),
		SerialLog:    filepath.Join(o.Dir, "serial.log"),
		SSHAddr:      o.SSHAddr,
		output:       &proc.Output{},
	}
	if len(m.SerialSocket) > 100 {
		return nil, fmt.Errorf("virtlauncher: directory %q is too long for unix socket paths", o.Dir)
	}
	for _, f := range []string{m.VNCSocket, m.SerialSocket, m.QMPSocket, m.AgentSocket, m.SerialLog} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	volumes, err := backings(ctx, vmi, o)
	if err != nil {
		return nil, err
	}
	args, err := Domain(vmi, Host{Image: o.Image, Volumes: volumes, VNC: m.VNCSocket, Serial: m.SerialSocket,
		SerialLog: m.SerialLog, QMP: m.QMPSocket, Agent: m.AgentSocket, SSHAddr: o.SSHAddr})
	if err != nil {
		return nil, err
	}
	m.Args = args
	cmd := exec.Command(qemu.Binary, args...)
	cmd.Stdout, cmd.Stderr = m.output, m.output
	// QEMU must not outlive a test binary that dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if m.process, err = proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s (Debian package qemu-system-x86): %w", qemu.Binary, err)
	}
	if err := m.waitSocket(ctx, m.QMPSocket); err != nil {
		return nil, errors.Join(err, m.Stop())
	}
	return m, nil
}

// backings prepares the file behind every volume.
func backings(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, o Options) (map[string]Backing, error) {
	out := map[string]Backing{}
	images := 0
	for _, v := range vmi.Spec.Volumes {
		kind, disk, err := classify(v)
		if err != nil {
			return nil, err
		}
		switch kind {
		case guestImage:
			if images++; images > 1 {
				return nil, fmt.Errorf("virtlauncher: volume %q: one containerDisk (the guest image) is presented, not more", v.Name)
			}
			out[v.Name] = Backing{Path: o.Image.Root, Snapshot: true}
		case claim:
			path, err := claimFile(ctx, o.Client, o.Storage, vmi.Namespace, disk.Name, disk.Kind == api.KindDataVolume)
			if err != nil {
				return nil, err
			}
			out[v.Name] = Backing{Path: path}
		case emptyDisk:
			path := filepath.Join(o.Dir, v.Name+".empty.img")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				return nil, err
			}
			if err := os.Truncate(path, v.EmptyDisk.Capacity.Value()); err != nil {
				return nil, err
			}
			out[v.Name] = Backing{Path: path}
		case noCloud:
			nc, _, err := NoCloudOf(vmi, func(name string) (map[string][]byte, error) {
				s := &corev1.Secret{}
				err := o.Client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: name}, s)
				return s.Data, err
			})
			if err != nil {
				return nil, err
			}
			iso, err := nc.WriteISO(ctx, o.Dir)
			if err != nil {
				return nil, err
			}
			out[v.Name] = Backing{Path: iso}
		}
	}
	return out, nil
}

// waitSocket waits until QEMU accepts connections on path.
func (m *Machine) waitSocket(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-m.process.Exited():
			return fmt.Errorf("virtlauncher: qemu exited: %s", strings.TrimSpace(m.output.String()))
		case <-ctx.Done():
			return fmt.Errorf("virtlauncher: qemu did not create %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Serial is what the guest has written on its serial console so far.
func (m *Machine) Serial() string {
	b, _ := os.ReadFile(m.SerialLog)
	return string(b)
}

// WaitSerial waits until the serial console has shown want, and returns
// the console's output from there on.
func (m *Machine) WaitSerial(ctx context.Context, want string) (string, error) {
	for {
		if _, after, ok := strings.Cut(m.Serial(), want); ok {
			return after, nil
		}
		select {
		case <-m.process.Exited():
			return "", fmt.Errorf("virtlauncher: qemu exited before the guest wrote %q: %s", want, strings.TrimSpace(m.output.String()))
		case <-ctx.Done():
			return "", fmt.Errorf("virtlauncher: the guest did not write %q on its serial console: %w; it wrote:\n%s", want, ctx.Err(), tail(m.Serial(), 3000))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// WaitSSH waits until the guest's sshd answers with its banner.
func (m *Machine) WaitSSH(ctx context.Context) error {
	for {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := d.DialContext(dctx, "tcp", m.SSHAddr)
		cancel()
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4)
			n, _ := conn.Read(buf)
			_ = conn.Close()
			if string(buf[:n]) == "SSH-" {
				return nil
			}
		}
		select {
		case <-m.process.Exited():
			return errors.New("virtlauncher: qemu exited before the guest's sshd answered")
		case <-ctx.Done():
			return fmt.Errorf("virtlauncher: the guest's sshd did not answer on %s: %w", m.SSHAddr, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Shutdown presses the power button, as KubeVirt's graceful stop does,
// and waits for the guest to power off; when ctx ends first, QEMU is
// killed. The guest's disks are consistent only after a clean shutdown.
func (m *Machine) Shutdown(ctx context.Context) error {
	if err := qemu.Powerdown(ctx, m.QMPSocket); err != nil {
		return errors.Join(err, m.Stop())
	}
	select {
	case <-m.process.Exited():
		return m.Stop()
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("virtlauncher: the guest did not power off: %w", ctx.Err()), m.Stop())
	}
}

// Stop kills QEMU and waits for it to exit. Safe to call more than once.
func (m *Machine) Stop() error {
	m.stopOnce.Do(func() {
		if err := m.process.Kill(); err != nil {
			m.stopErr = fmt.Errorf("kill qemu: %w", err)
		}
	})
	return m.stopErr
}
