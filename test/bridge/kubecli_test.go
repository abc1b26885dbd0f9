package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/internal/proc"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// The tests in this file drive the bridge with kubecli-peer (test/kubecli):
// KubeVirt's own client library, kubevirt.io/client-go v1.9.0 kubecli, making
// the calls virtctl makes. It is a binary of its own module, found in
// $KUBECLI_PEER (make test sets it) or built by hack/kubecli-peer.sh.

// kubecliPeerEnv names the kubecli-peer binary.
const kubecliPeerEnv = "KUBECLI_PEER"

// peerTimeout bounds one kubecli-peer command that should finish by itself.
const peerTimeout = 60 * time.Second

// consoleWait is the --timeout of the not-running test: long enough for the
// test to see the peer wait, then to start the VMI.
const consoleWait = 30 * time.Second

// kubecliPeer is the path of the kubecli-peer binary. It is never a skip: a
// missing peer fails the test.
var kubecliPeer = sync.OnceValues(func() (string, error) {
	if p := os.Getenv(kubecliPeerEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", kubecliPeerEnv, err)
		}
		return p, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", "kubecli-peer.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kubecli-peer.sh: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

// peer runs kubecli-peer commands with one kubeconfig.
type peer struct {
	bin, kubeconfig string
}

// newPeer writes a kubeconfig for server (trusting caPEM) as the token's
// user in namespace team-a, as `make demo` writes one for virtctl.
func newPeer(t *testing.T, server string, caPEM []byte, token string) *peer {
	t.Helper()
	bin, err := kubecliPeer()
	if err != nil {
		t.Fatalf("kubecli-peer: %v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["virtstation"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["virtstation"] = &clientcmdapi.Context{Cluster: "virtstation", AuthInfo: "user", Namespace: userNS}
	cfg.CurrentContext = "virtstation"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return &peer{bin: bin, kubeconfig: path}
}

// run runs a command to its end and returns its stdout; a failure fails
// the test with its stderr.
func (p *peer) run(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := p.try(t, args...)
	if err != nil {
		t.Fatalf("kubecli-peer %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return stdout
}

// try runs a command to its end.
func (p *peer) try(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), peerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// start runs a long-lived command (console, vnc) until the test ends.
func (p *peer) start(t *testing.T, args ...string) *peerProcess {
	t.Helper()
	cmd := exec.Command(p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	pp := &peerProcess{cmd: cmd, done: make(chan struct{}), name: strings.Join(args, " ")}
	cmd.Stdout, cmd.Stderr = &pp.stdout, &pp.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	pp.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pp.err = cmd.Wait(); close(pp.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-pp.done
	})
	return pp
}

// peerProcess is a running kubecli-peer. stdout and stderr are safe to read
// while it runs.
type peerProcess struct {
	name           string
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr proc.Output
	done           chan struct{}
	err            error // set once done is closed
}

// waitOutput waits until the process's stdout (or stderr) holds want.
func (pp *peerProcess) waitOutput(t *testing.T, buf *proc.Output, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if s := buf.String(); strings.Contains(s, want) {
			return s
		}
		select {
		case <-pp.done:
			if s := buf.String(); strings.Contains(s, want) {
				return s
			}
			t.Fatalf("kubecli-peer %s exited (%v) before writing %q; stdout %q, stderr %q", pp.name, pp.err, want, pp.stdout.String(), pp.stderr.String())
		case <-deadline:
			t.Fatalf("kubecli-peer %s did not write %q in %v; stdout %q, stderr %q", pp.name, want, timeout, pp.stdout.String(), pp.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wait waits for the process to exit and returns its error.
func (pp *peerProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-pp.done:
		return pp.err
	case <-time.After(ioTimeout):
		t.Fatalf("kubecli-peer %s still running; stderr %q", pp.name, pp.stderr.String())
		return nil
	}
}

// console connects the peer's console to vmi, types "hello" and expects
// the guest's "HELLO", then hangs up by closing stdin, as a user ends
// virtctl console.
func (p *peer) console(t *testing.T, vmi string) {
	t.Helper()
	pp := p.start(t, "console", vmi, "--timeout", "30s")
	pp.waitOutput(t, &pp.stderr, "Successfully connected to "+vmi+" console.", peerTimeout)
	typeHello(t, pp)
}

// typeHello types into a connected console and reads the guest's echo,
// then closes stdin and expects a clean exit.
func typeHello(t *testing.T, pp *peerProcess) {
	t.Helper()
	if _, err := io.WriteString(pp.stdin, "hello"); err != nil {
		t.Fatal(err)
	}
	pp.waitOutput(t, &pp.stdout, "HELLO", ioTimeout)
	_ = pp.stdin.Close()
	if err := pp.wait(t); err != nil {
		t.Fatalf("console after stdin closed: %v; stderr %q", err, pp.stderr.String())
	}
}

// vnc opens the peer's VNC proxy to vmi and returns its TCP port, read
// from the {"port":N} line `virtctl vnc --proxy-only` prints.
func (p *peer) vnc(t *testing.T, vmi string, extra ...string) (*peerProcess, int) {
	t.Helper()
	pp := p.start(t, append([]string{"vnc", vmi}, extra...)...)
	out := pp.waitOutput(t, &pp.stdout, "}\n", peerTimeout)
	var port struct {
		Port int `json:"port"`
	}
	line, _, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(line), &port); err != nil || port.Port == 0 {
		t.Fatalf("vnc printed %q, want {\"port\":N} (%v)", out, err)
	}
	return pp, port.Port
}

// rfbGreeting connects a VNC viewer to the peer's proxy port and reads the
// RFB greeting QEMU sends first; the viewer hangs up when the test ends.
func rfbGreeting(t *testing.T, port int) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	greeting := make([]byte, len("RFB 003.008\n"))
	if _, err := io.ReadFull(c, greeting); err != nil {
		t.Fatalf("read the RFB greeting through the peer's proxy: %v", err)
	}
	return string(greeting)
}

// screenshot takes a screenshot of vmi with the peer and checks it is a
// PNG of QEMU's display.
func (p *peer) screenshot(t *testing.T, vmi string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "screen.png")
	p.run(t, "screenshot", vmi, "--file", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot (%d bytes) is not a PNG: %v", len(b), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	defer cancel()
	w, h, err := stack.QEMU.ScreenSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != int(w) || got.Y != int(h) {
		t.Fatalf("screenshot is %v, QEMU's display %dx%d", got, w, h)
	}
}

// version asks for KubeVirt's version through kubecli's ServerVersion.
func (p *peer) version(t *testing.T) {
	t.Helper()
	out := p.run(t, "version")
	var info virthandler.VersionInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.GitVersion != virthandler.KubeVirtVersion {
		t.Fatalf("version printed %q (%v), want gitVersion %s", out, err, virthandler.KubeVirtVersion)
	}
}

// startTLSReplica serves a bridge replica over TLS, as `make demo` and any
// real install do: client-go sends a bearer token only over https.
func startTLSReplica(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	srv, err := bridge.NewFromConfig(t.Context(), bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: "replica-tls", LeaseDuration: leaseDuration,
		Options: bridge.Options{PingInterval: time.Second, SSHPort: sshPort()},
		Log:     logs.logger().WithName("replica-tls"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewTLSServer(srv)
	t.Cleanup(hs.Close)
	return hs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
}

// waitNoSessions waits until ws1 has no bridge session of any mode, so the
// next dial is not refused as held.
func waitNoSessions(t *testing.T, vm string) {
	t.Helper()
	deadline := time.Now().Add(2 * leaseDuration)
	for {
		resp, b := request(t, http.MethodGet, replicaA.URL+"/api/v1/namespaces/"+userNS+"/virtualmachines/"+vm+"/sessions", tokens["alice"])
		var list struct {
			Sessions []json.RawMessage `json:"sessions"`
		}
		if resp.StatusCode == http.StatusOK && json.Unmarshal([]byte(b), &list) == nil && len(list.Sessions) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions of %s still held: %s %s", vm, resp.Status, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kubevirtPath(vmi, subresource string) string {
	return "/apis/subresources.kubevirt.io/v1/namespaces/" + userNS + "/virtualmachineinstances/" + vmi + "/" + subresource
}

func TestKubecliDrivesTheBridge(t *testing.T) {
	replica, ca := startTLSReplica(t)
	alice := newPeer(t, replica.URL, ca, tokens["alice"])

	t.Run("console", func(t *testing.T) {
		waitNoSessions(t, "ws1")
		alice.console(t, "ws1")
		waitUpstreamClosed(t, virthandler.Console)
	})

	t.Run("vnc", func(t *testing.T) {
		waitNoSessions(t, "ws1")
		pp, port := alice.vnc(t, "ws1")
		if got := rfbGreeting(t, port); got != "RFB 003.008\n" {
			t.Fatalf("greeting through the peer %q, want QEMU's RFB 003.008", got)
		}
		_ = pp.cmd.Process.Kill()
		<-pp.done
		waitUpstreamClosed(t, virthandler.VNC)
	})

	// virtctl vnc sends preserveSession=false unless told otherwise: in
	// KubeVirt that takes the display from whoever has it.
	t.Run("vnc take-over by preserveSession=false", func(t *testing.T) {
		waitNoSessions(t, "ws1")
		holder := mustDial(t, replicaA.URL, kubevirtPath("ws1", "vnc"), tokens["bob"])
		readUntil(t, holder, "RFB 003.008\n")

		// --preserve-session leaves bob's session alone: the peer is refused.
		stdout, stderr, err := alice.try(t, "vnc", "ws1", "--preserve-session")
		if err == nil || !strings.Contains(stderr, "(HTTP 409)") {
			t.Fatalf("vnc --preserve-session while bob holds the display: %v, stdout %q, stderr %q; want a 409 refusal", err, stdout, stderr)
		}
		// bob is still connected: QEMU answers his RFB version with the
		// security types.
		send(t, holder, websocket.BinaryMessage, "RFB 003.008\n")
		if err := holder.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := holder.ReadMessage(); err != nil {
			t.Fatalf("bob's session after the refused --preserve-session: %v", err)
		}

		pp, port := alice.vnc(t, "ws1")
		ce := closeFrame(t, holder)
		if ce.Code != relay.CodeTakenOver || !strings.Contains(ce.Text, "taken over by another user") {
			t.Fatalf("bob's close frame %d %q, want %d taken over by another user", ce.Code, ce.Text, relay.CodeTakenOver)
		}
		if got := rfbGreeting(t, port); got != "RFB 003.008\n" {
			t.Fatalf("greeting through the peer after the take-over %q", got)
		}
		_ = pp.cmd.Process.Kill()
		<-pp.done
		waitUpstreamClosed(t, virthandler.VNC)
	})

	t.Run("screenshot", func(t *testing.T) {
		alice.screenshot(t, "ws1")
	})

	// virtctl console --timeout retries while the server answers 400, as
	// KubeVirt does for a VMI that is not running yet.
	t.Run("console waits for a VMI that is not running", func(t *testing.T) {
		const name = "kubecli-wait"
		ctx := testContext(t)
		createScheduling(t, ctx, name)
		pp := alice.start(t, "console", name, "--timeout", consoleWait.String())
		// kubecli retries once a second; several retries must leave it waiting.
		select {
		case <-pp.done:
			t.Fatalf("console of a scheduling VMI gave up at once (%v): %q; want it to wait, as virtctl does on KubeVirt's 400", pp.err, pp.stderr.String())
		case <-time.After(4 * time.Second):
		}
		if strings.Contains(pp.stderr.String(), "Successfully connected") {
			t.Fatalf("console connected to a VMI that is still scheduling: %q", pp.stderr.String())
		}
		setPhase(t, ctx, name, kubevirtv1.Running)
		pp.waitOutput(t, &pp.stderr, "Successfully connected to "+name+" console.", consoleWait)
		typeHello(t, pp)
		waitUpstreamClosed(t, virthandler.Console)
	})

	t.Run("vmi", func(t *testing.T) {
		if got := strings.TrimSpace(alice.run(t, "vmi", "ws1")); got != string(kubevirtv1.Running) {
			t.Fatalf("vmi printed %q, want Running", got)
		}
	})

	t.Run("version", func(t *testing.T) {
		alice.version(t)
	})
}

// TestKubecliDrivesTheAPIServer runs the same calls straight against the
// API server and the aggregated stand-in virt-api, without the bridge: the
// peer is a real KubeVirt client, independent of what the bridge does.
func TestKubecliDrivesTheAPIServer(t *testing.T) {
	alice := newPeer(t, cp.Config.Host, cp.Config.CAData, tokens["alice"])
	t.Run("console", func(t *testing.T) {
		alice.console(t, "ws1")
		waitUpstreamClosed(t, virthandler.Console)
	})
	t.Run("vnc", func(t *testing.T) {
		pp, port := alice.vnc(t, "ws1")
		if got := rfbGreeting(t, port); got != "RFB 003.008\n" {
			t.Fatalf("greeting %q, want QEMU's RFB 003.008", got)
		}
		calls := handler.Calls()
		if last := calls[len(calls)-1]; last.Kind != virthandler.VNC || last.PreserveSession || last.User != user("alice") {
			t.Errorf("the stand-in got %+v, want alice's VNC with preserveSession=false", last)
		}
		if s := pp.stderr.String(); strings.Contains(s, "paused-VM warning") {
			t.Errorf("the peer could not read the VMI: %q", s)
		}
		_ = pp.cmd.Process.Kill()
		<-pp.done
		waitUpstreamClosed(t, virthandler.VNC)
	})
	t.Run("screenshot", func(t *testing.T) {
		alice.screenshot(t, "ws1")
	})
	t.Run("vmi", func(t *testing.T) {
		if got := strings.TrimSpace(alice.run(t, "vmi", "ws1")); got != string(kubevirtv1.Running) {
			t.Fatalf("vmi printed %q, want Running", got)
		}
	})
	t.Run("version", func(t *testing.T) {
		alice.version(t)
	})
}

// createScheduling makes VM name with a VMI in phase Scheduling, whose
// console leads to the QEMU machine once it runs.
func createScheduling(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		}},
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling},
	}
	for _, obj := range []client.Object{vm, vmi} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	stack.Attach(userNS, name)
	cleanupCtx := context.WithoutCancel(ctx) // the test's context may have ended by cleanup
	t.Cleanup(func() {
		handler.Unregister(userNS, name)
		for _, obj := range []client.Object{vmi, vm} {
			if err := admin.Delete(cleanupCtx, obj); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
	})
}

// setPhase writes the VMI's phase, as virt-handler reports it (the VMI CRD
// here has no status subresource).
func setPhase(t *testing.T, ctx context.Context, name string, phase kubevirtv1.VirtualMachineInstancePhase) {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: userNS, Name: name}, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase = phase
	if err := admin.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
}
