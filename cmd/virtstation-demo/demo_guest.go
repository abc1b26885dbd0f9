package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/internal/virtlauncher"
)

// guestEnv chooses the machine behind dev-alice.
const guestEnv = "DEMO_GUEST"

// guestMode is the machine that plays dev-alice.
type guestMode int

const (
	// debianGuest boots dev-alice's stored spec: the Debian guest image
	// with its data disk and cloud-init, under QEMU TCG.
	debianGuest guestMode = iota
	// echoGuest is a 512-byte guest that echoes the serial line in
	// capitals, behind a VMI made up by the demo: fast, and no image.
	echoGuest
)

// parseGuestMode reads DEMO_GUEST: unset or "debian", or "echo".
func parseGuestMode(v string) (guestMode, error) {
	switch v {
	case "", "debian":
		return debianGuest, nil
	case "echo":
		return echoGuest, nil
	}
	return 0, fmt.Errorf("%s=%q: want debian (the default) or echo", guestEnv, v)
}

// guest is the machine the demo will put behind dev-alice.
type guest struct {
	mode guestMode
	// image is the Debian guest (debianGuest only).
	image virtlauncher.Image
}

// Timeouts of the real guest, under QEMU TCG on a busy machine.
const (
	// guestBootTimeout bounds the boot to the serial login prompt: about
	// a minute on an idle 2-core machine, several when it is shared.
	guestBootTimeout = 5 * time.Minute
	// guestSSHTimeout bounds the wait for the guest's sshd and alice's
	// key after the login prompt (cloud-init may still be finishing).
	guestSSHTimeout = 2 * time.Minute
	// guestShutdownTimeout bounds the guest's own power-off at stop, after
	// which QEMU is killed: alice-home is then consistent on the next run.
	guestShutdownTimeout = 45 * time.Second
)

// bootedGuest is dev-alice running in QEMU.
type bootedGuest struct {
	machine *virtlauncher.Machine
	// dir holds the machine's sockets and per-boot files.
	dir     string
	sshPort int
	started time.Time
	// log is the demo's output, for what happens at stop.
	log io.Writer
}

// bootGuest starts dev-alice as KubeVirt would: KubeVirt's own code builds
// the VMI from the stored VM (env.StartVM), the stand-in virt-launcher
// presents it to QEMU with the claims' files under f.storage(), the
// stand-in virt-api serves its console and display, and the VMI's status
// says what virt-handler would: Running, at the loopback address the
// guest's port 22 is forwarded to (port: the same at every boot, as the
// bridge's SSH dials it).
func bootGuest(ctx context.Context, env *testenv.Env, stack *bridgestack.Stack, img virtlauncher.Image, f demoFiles, port int, out io.Writer) (*bootedGuest, error) {
	if err := os.MkdirAll(f.storage(), 0o700); err != nil {
		return nil, err
	}
	vmi, err := env.StartVM(ctx, demoNamespace, demoVM)
	if err != nil {
		return nil, fmt.Errorf("start %s/%s: %w", demoNamespace, demoVM, err)
	}
	// Unix socket paths are short: a directory of its own under /tmp.
	dir, err := os.MkdirTemp("", "vsdemo-")
	if err != nil {
		return nil, err
	}
	sshAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	m, err := virtlauncher.Start(ctx, vmi, virtlauncher.Options{Client: env.Client, Image: img, Dir: dir, Storage: f.storage(), SSHAddr: sshAddr})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("boot %s/%s: %w", demoNamespace, demoVM, err), os.RemoveAll(dir))
	}
	g := &bootedGuest{machine: m, dir: dir, sshPort: port, started: time.Now(), log: out}
	stack.VirtAPI.Register(demoNamespace, demoVM, virthandler.Target{Console: m.SerialSocket, VNC: m.VNCSocket, QMP: m.QMPSocket})
	vmi.Status = runningStatus(vmi, "127.0.0.1")
	// The bridge's SSH dials the launcher pod's address, never the guest's.
	if err := bridgestack.Launch(ctx, env.Client, vmi, "127.0.0.1"); err != nil {
		return nil, errors.Join(fmt.Errorf("start the launcher pod of %s/%s: %w", demoNamespace, demoVM, err), g.stop(ctx))
	}
	// The VMI CRD has no status subresource here: Update writes it.
	if err := env.Client.Update(ctx, vmi); err != nil {
		return nil, errors.Join(fmt.Errorf("write the status of the VMI %s/%s: %w", demoNamespace, demoVM, err), g.stop(ctx))
	}
	return g, nil
}

// runningStatus is what virt-handler reports for vmi once its guest runs
// at ip: phase Running and the pod-network interface with its address and
// MAC, where the bridge's SSH route dials.
func runningStatus(vmi *kubevirtv1.VirtualMachineInstance, ip string) kubevirtv1.VirtualMachineInstanceStatus {
	st := vmi.Status
	st.Phase = kubevirtv1.Running
	iface := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: "default", IP: ip, IPs: []string{ip}}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		if i.Name == iface.Name {
			iface.MAC = i.MacAddress
		}
	}
	st.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{iface}
	return st
}

// stop powers the guest off as KubeVirt's graceful stop does (the ACPI
// power button), kills QEMU when it has not after guestShutdownTimeout,
// and removes the per-boot files. ctx may be done already (Ctrl-C).
func (g *bootedGuest) stop(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guestShutdownTimeout)
	defer cancel()
	if err := g.machine.Shutdown(sctx); err != nil {
		// Shutdown kills QEMU when the guest does not power off; only a
		// failure to stop it is the demo's error.
		if stopErr := g.machine.Stop(); stopErr != nil {
			return errors.Join(err, os.RemoveAll(g.dir))
		}
		fmt.Fprintf(g.log, "%s did not power off within %s, so QEMU was stopped (%v); alice-home's ext4 journal is replayed at the next mount.\n", demoVM, guestShutdownTimeout, err)
	}
	return os.RemoveAll(g.dir)
}

// freePort is a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.Join(fmt.Errorf("listener address %v is not TCP", ln.Addr()), ln.Close())
	}
	return addr.Port, ln.Close()
}

// proveGuest waits for dev-alice's login prompt and shows, through the
// bridge, what its user gets: the Debian login on the serial console, a
// second client refused, a shell over SSH with her key (her account, her
// home on alice-home), and the display.
func proveGuest(ctx context.Context, g *bootedGuest, c bridgeClient, f demoFiles, out io.Writer) error {
	fmt.Fprintf(out, "Booting %s: Debian under QEMU TCG, about a minute (serial log: %s)...\n", demoVM, g.machine.SerialLog)
	wctx, cancel := context.WithTimeout(ctx, guestBootTimeout)
	defer cancel()
	if _, err := g.machine.WaitSerial(wctx, "login:"); err != nil {
		return fmt.Errorf("boot %s: %w", demoVM, err)
	}
	fmt.Fprintf(out, "%s booted to its login prompt in %s.\n", demoVM, time.Since(g.started).Round(time.Second))
	if err := demoConsole(c, loginProof, out); err != nil {
		return err
	}
	if err := demoSSH(ctx, g, c, f, out); err != nil {
		return err
	}
	return demoScreenshot(ctx, c, f, out)
}

// sshProbe is what the demo runs in alice's shell; sshProbeOut finds its
// answer (the echoed command line holds "$(", which the answer cannot).
// It waits for cloud-init first: the Virtstation part's runcmd, in
// cloud-init's final stage, gives a disk formatted before alice's account
// existed to her, and that stage may run after sshd lets her in.
const sshProbe = `cloud-init status --wait >/dev/null; echo "@@ user=$(id -un) home=$(findmnt -n -o SOURCE,FSTYPE --target /home/alice | tr -s ' ' ,) owner=$(stat -c %U /home/alice) motd=$(tail -n 1 /etc/motd) @@"; exit` + "\n"

var sshProbeOut = regexp.MustCompile(`@@ (user=[^$@]*) @@`)

// sshRetryCodes are the bridge's close codes worth a retry while the guest
// finishes booting: its sshd not up yet, alice's key not installed yet.
var sshRetryCodes = map[int]bool{relay.CodeSSHUnreachable: true, relay.CodeSSHAuthFailed: true}

// demoSSH logs in as alice over the bridge's SSH route with her private
// key, and prints what her shell says about her account and home.
func demoSSH(ctx context.Context, g *bootedGuest, c bridgeClient, f demoFiles, out io.Writer) error {
	key, err := os.ReadFile(f.sshKey())
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, guestSSHTimeout)
	defer cancel()
	if err := g.machine.WaitSSH(wctx); err != nil {
		return err
	}
	hello, err := json.Marshal(map[string]any{"type": "ssh", "user": demoUser, "privateKey": string(key), "cols": 120, "rows": 40})
	if err != nil {
		return err
	}
	for {
		got, err := sshOnce(c, hello)
		if err == nil {
			fmt.Fprintf(out, "SSH through the bridge as %s with her key (%s): %s\n", demoUser, f.sshKey(), got)
			return nil
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || !sshRetryCodes[ce.Code] {
			return fmt.Errorf("SSH to %s through the bridge: %w", demoVM, err)
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("SSH to %s through the bridge: %w (last: %w)", demoVM, wctx.Err(), err)
		case <-time.After(3 * time.Second):
		}
	}
}

// sshOnce opens one SSH session, runs sshProbe and returns its answer.
func sshOnce(c bridgeClient, hello []byte) (string, error) {
	conn, resp, err := c.dial("ssh")
	if err != nil {
		return "", fmt.Errorf("open the SSH route: %w (%s)", err, status(resp))
	}
	defer func() { _ = conn.Close() }()
	if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
		return "", err
	}
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte(sshProbe)); err != nil {
		return "", err
	}
	var got strings.Builder
	// cloud-init status --wait may wait for the final stage.
	_ = conn.SetReadDeadline(time.Now().Add(guestSSHTimeout))
	for {
		if m := sshProbeOut.FindStringSubmatch(got.String()); m != nil {
			return m[1], nil
		}
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return "", err
		}
		got.Write(msg)
	}
}

// demoScreenshot saves the display through the bridge's vnc/screenshot
// route (KubeVirt's path, as virtctl vnc screenshot asks for it).
func demoScreenshot(ctx context.Context, c bridgeClient, f demoFiles, out io.Writer) error {
	url := c.base + "/apis/subresources.kubevirt.io/v1/namespaces/" + demoNamespace + "/virtualmachineinstances/" + demoVM + "/vnc/screenshot?moveCursor=false"
	rctx, cancel := context.WithTimeout(ctx, demoIOTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("screenshot through the bridge: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("screenshot through the bridge: %s", status(resp))
	}
	png, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.screenshot(), png, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "The display through the bridge: %s (%s's screen, a PNG of %d bytes)\n", f.screenshot(), demoVM, len(png))
	return nil
}

// guestImageDir is the directory of img, as hack/guest-image.sh prints it.
func guestImageDir(img virtlauncher.Image) string { return filepath.Dir(img.Root) }
