package guest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/internal/virtlauncher"
)

const (
	teamA = "team-a"
)

// Bounds. A TCG boot takes about a minute on an idle 2-core machine;
// these leave room for a loaded CI machine and fail with the guest's
// serial console in the message.
const (
	bootTimeout     = 8 * time.Minute
	shutdownTimeout = 2 * time.Minute
	ioTimeout       = 30 * time.Second
)

// cloudInitDone is what cloud-init writes on the console when its final
// stage has run (runcmd included).
const cloudInitDone = " finished at "

// guest is a booted VMI.
type guest struct {
	*virtlauncher.Machine
	vmi *kubevirtv1.VirtualMachineInstance
	t   *testing.T
}

// boot starts the stored VM namespace/name as KubeVirt would and boots
// its VMI with the guest's SSH on ip; the bridge reaches its console,
// display and SSH. It returns once cloud-init has finished.
func boot(t *testing.T, namespace, name, ip string) *guest {
	t.Helper()
	ctx := context.Background()
	vmi, err := env.StartVM(ctx, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "vs-guest-")
	if err != nil {
		t.Fatal(err)
	}
	m, err := virtlauncher.Start(ctx, vmi, virtlauncher.Options{
		Client: env.Client, Image: guestImage, Dir: dir, Storage: storage,
		SSHAddr: net.JoinHostPort(ip, strconv.Itoa(sshPort)),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{Machine: m, vmi: vmi, t: t}
	t.Logf("qemu %s", strings.Join(m.Args, " "))
	t.Cleanup(func() {
		g.saveSerial()
		_ = m.Stop()
		_ = os.RemoveAll(dir)
	})
	stack.VirtAPI.Register(namespace, name, virthandler.Target{Console: m.SerialSocket, VNC: m.VNCSocket, QMP: m.QMPSocket})
	// What virt-handler would report once the domain runs.
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{
		Name: vmi.Spec.Domain.Devices.Interfaces[0].Name, IP: ip, IPs: []string{ip},
		MAC: vmi.Spec.Domain.Devices.Interfaces[0].MacAddress,
	}}
	// The bridge's SSH dials the launcher pod's address (ip), never the
	// interfaces' above.
	if err := bridgestack.Launch(ctx, env.Client, vmi, ip); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	start := time.Now()
	if _, err := m.WaitSerial(bctx, cloudInitDone); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitSSH(bctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s booted: cloud-init finished and sshd answers after %v", namespace, name, time.Since(start).Round(time.Second))
	return g
}

// stop shuts the guest down as KubeVirt's graceful stop does and deletes
// its VMI, as virt-controller does once the domain is gone.
func (g *guest) stop() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		g.t.Fatal(err)
	}
	g.saveSerial()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	key := client.ObjectKeyFromObject(g.vmi)
	if err := env.Client.Get(ctx, key, vmi); err != nil {
		g.t.Fatal(err)
	}
	vmi.Finalizers = nil
	if err := env.Client.Update(ctx, vmi); err != nil {
		g.t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, vmi); err != nil && !apierrors.IsNotFound(err) {
		g.t.Fatal(err)
	}
	for env.Client.Get(ctx, key, vmi) == nil {
		if ctx.Err() != nil {
			g.t.Fatalf("the VMI %s is not gone", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// saveSerial keeps the serial console's log as a test artefact.
func (g *guest) saveSerial() {
	// One file per boot: the VMI's UID is new at every start.
	name := strings.NewReplacer("/", "-", " ", "-").Replace(g.t.Name()) + "-" + g.vmi.Name + "-" + string(g.vmi.UID) + "-serial.log"
	if err := os.WriteFile(filepath.Join(artifacts, name), []byte(g.Serial()), 0o644); err != nil {
		g.t.Logf("save the serial log: %v", err)
	}
}

// run runs cmd in the guest as user over SSH straight to the guest's port
// (the test's own eyes, not the bridge) and returns its output.
func (g *guest) run(t *testing.T, user string, key ssh.Signer, cmd string) string {
	t.Helper()
	out, err := g.try(user, key, cmd)
	if err != nil {
		t.Fatalf("%s in the guest: %v\n%s", cmd, err, out)
	}
	return out
}

func (g *guest) try(user string, key ssh.Signer, cmd string) (string, error) {
	c, err := ssh.Dial("tcp", g.SSHAddr, &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // #nosec G106 -- the test's own probe of its own guest
		Timeout:         ioTimeout,
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer func() { _ = s.Close() }()
	var stderr strings.Builder
	s.Stderr = &stderr
	out, err := s.Output(cmd)
	if err != nil {
		return strings.TrimSpace(string(out) + "\n" + stderr.String()), err
	}
	return strings.TrimSpace(string(out)), nil
}

// keyPair is a user's SSH key: the private key in PEM, as the bridge's
// client sends it, the signer and the authorized_keys line.
type keyPair struct {
	pem    string
	signer ssh.Signer
	public string
}

func newKey(t *testing.T, comment string) keyPair {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{pem: string(pem.EncodeToMemory(block)), signer: signer,
		public: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + comment}
}

// dialBridge opens a session of mode ("console", "vnc", "ssh") through the
// bridge, as a CLI does, with the namespace's workstation user's token.
func dialBridge(t *testing.T, namespace, vm, mode string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(bridgeS.URL, "http") + "/api/v1/namespaces/" + namespace + "/virtualmachines/" + vm + "/" + mode
	d := websocket.Dialer{Subprotocols: []string{virthandler.Subprotocol}, HandshakeTimeout: ioTimeout}
	deadline := time.Now().Add(ioTimeout)
	c, resp, err := d.Dial(url, http.Header{"Authorization": {"Bearer " + tokens[namespace]}})
	// 409: the previous session of this mode is still giving its slot back.
	for err != nil && resp != nil && resp.StatusCode == http.StatusConflict && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		c, resp, err = d.Dial(url, http.Header{"Authorization": {"Bearer " + tokens[namespace]}})
	}
	if err != nil {
		status := "no response"
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("open %s of %s/%s through the bridge: %v (%s)", mode, namespace, vm, err, status)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bridgeSSH logs in to vm through the bridge's SSH route with key and
// returns the shell, or the close frame the bridge refused with.
func bridgeSSH(t *testing.T, namespace, vm, user string, key keyPair) (*websocket.Conn, *websocket.CloseError) {
	t.Helper()
	c := dialBridge(t, namespace, vm, "ssh")
	hello, err := json.Marshal(map[string]any{"type": "ssh", "user": user, "privateKey": key.pem, "cols": 100, "rows": 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.TextMessage, hello); err != nil {
		t.Fatal(err)
	}
	// A refusal is a close frame; a login, the shell's first output.
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return nil, ce
	}
	if err != nil {
		t.Fatalf("SSH to %s/%s through the bridge: %v", namespace, vm, err)
	}
	return c, nil
}

// closeSession ends a bridge session as a client does and waits until the
// bridge has let its slot go (one session per VM and mode).
func closeSession(t *testing.T, c *websocket.Conn) {
	t.Helper()
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			break
		}
	}
	_ = c.Close()
}

// shell runs line in a bridge SSH session and waits for want.
func shell(t *testing.T, c *websocket.Conn, line, want string) string {
	t.Helper()
	if err := c.WriteMessage(websocket.BinaryMessage, []byte(line+"\n")); err != nil {
		t.Fatal(err)
	}
	return readUntil(t, c, want)
}

// readUntil reads binary messages until the text read contains want.
func readUntil(t *testing.T, c *websocket.Conn, want string) string {
	t.Helper()
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	for !strings.Contains(got.String(), want) {
		_, p, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %q, read %q, then: %v", want, got.String(), err)
		}
		got.Write(p)
	}
	return got.String()
}

// refusedCode fails unless the bridge refused with code.
func refusedCode(t *testing.T, what string, ce *websocket.CloseError, code int) {
	t.Helper()
	if ce == nil {
		t.Fatalf("%s: the bridge let the session in, want close code %d", what, code)
	}
	if ce.Code != code {
		t.Fatalf("%s: close code %d (%q), want %d", what, ce.Code, ce.Text, code)
	}
}
