package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/testenv"
)

// The demo's workstation: dev-alice of examples/10-workstation.yaml,
// reached by its user alice.
const (
	demoNamespace = "workstations"
	demoVM        = "dev-alice"
	demoUser      = "alice"
)

// demoIOTimeout bounds the demo's own console exchange.
const demoIOTimeout = 15 * time.Second

// demoSessionsGrace bounds the wait, at stop, for open sessions to end
// and give their Leases back (the bridge gives each release 5 s).
const demoSessionsGrace = 10 * time.Second

// demoServerIdleTimeout closes a keep-alive connection left idle this
// long; without one net/http keeps it open for as long as the peer does.
const demoServerIdleTimeout = 2 * time.Minute

// demoBridge runs the bridge on the demo control plane over TLS, starts
// dev-alice through it as her browser does, with the guest g playing her
// machine, proves it through the bridge as a user would, writes the user's
// token, the demo CA and a kubeconfig for virtctl to f, and prints how to
// reach it. It returns a stop function, which also stops the guest.
func demoBridge(ctx context.Context, env *testenv.Env, addr string, f demoFiles, g guest, out io.Writer) (func() error, error) {
	m, opts, bridgeOpts, err := newDemoMachine(env, f, g, out)
	if err != nil {
		return nil, err
	}
	stack, err := bridgestack.Start(ctx, env.Config, env.FrontProxy, env.RepoRoot, opts...)
	if err != nil {
		return nil, err
	}
	m.stack = stack
	c, stop, err := serveDemoBridge(ctx, env, m, addr, f, bridgeOpts)
	if err != nil {
		return nil, err
	}
	if err := writeDemoKubeconfig(c.base, f); err != nil {
		return nil, errors.Join(err, stop())
	}
	if err := proveThroughBridge(ctx, c, m, f, out); err != nil {
		return nil, errors.Join(err, stop())
	}
	showBridgeUsage(out, c.base, f, bridgeOpts.SSHPort)
	return stop, nil
}

// newDemoMachine is dev-alice's machine as g plays it, with the bridge
// stack's and the bridge's options that go with it: the Debian guest boots
// as KubeVirt would start it, with its SSH port forwarded; the echo guest
// is the stack's own QEMU.
func newDemoMachine(env *testenv.Env, f demoFiles, g guest, out io.Writer) (*demoMachine, []bridgestack.Option, bridge.Options, error) {
	m := &demoMachine{env: env, log: out}
	opts := []bridgestack.Option{bridgestack.WithVirtAPI(m.virtAPI())}
	var bridgeOpts bridge.Options
	if g.mode != debianGuest {
		m.boot = func(ctx context.Context) (demoGuest, error) { return echoRunning{}, echoVMI(ctx, env, m.stack) }
		fmt.Fprintf(out, "\nStarting the bridge, with QEMU playing %s/%s's machine...\n", demoNamespace, demoVM)
		return m, opts, bridgeOpts, nil
	}
	// The bridge's SSH dials this port at every boot.
	port, err := freePort()
	if err != nil {
		return nil, nil, bridgeOpts, err
	}
	bridgeOpts.SSHPort = port
	// dev-alice's own machine; the stack's echo machine is not needed.
	opts = append(opts, bridgestack.WithoutQEMU())
	m.boot = func(ctx context.Context) (demoGuest, error) {
		return bootGuest(ctx, env, m.stack, g.image, f, port, out)
	}
	fmt.Fprintf(out, "\nStarting the bridge; dev-alice boots as KubeVirt would start it (the VMI from KubeVirt's own code, the VM's disks as virt-launcher presents them)...\n")
	return m, opts, bridgeOpts, nil
}

// serveDemoBridge serves a bridge replica with opts on m's stack over TLS
// on addr, and returns a client of it as the demo user and the function
// that stops it, m's guest and the stack. When it fails, it stops the
// stack itself.
func serveDemoBridge(ctx context.Context, env *testenv.Env, m *demoMachine, addr string, f demoFiles, opts bridge.Options) (bridgeClient, func() error, error) {
	stack := m.stack
	// The bridge's own context: its Lease watch must end before the API
	// server is stopped.
	bctx, cancel := context.WithCancel(ctx)
	srv, token, err := demoBridgeServer(bctx, env, stack, f.token(), opts)
	if err != nil {
		cancel()
		return bridgeClient{}, nil, errors.Join(err, stack.Stop())
	}
	serverTLS, clientTLS, err := demoTLS(f)
	if err != nil {
		cancel()
		return bridgeClient{}, nil, errors.Join(err, stack.Stop())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		return bridgeClient{}, nil, errors.Join(fmt.Errorf("bridge address %s: %w (choose another with --bridge-address)", addr, err), stack.Stop())
	}
	hs := &http.Server{Handler: srv, TLSConfig: serverTLS, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: demoServerIdleTimeout}
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	stop := func() error {
		cancel()
		closeErr := hs.Close()
		// Sessions give their Leases back on goroutines of their own; the
		// API server must outlive that.
		wctx, done := context.WithTimeout(context.WithoutCancel(ctx), demoSessionsGrace)
		defer done()
		waitErr := srv.Wait(wctx)
		return errors.Join(closeErr, waitErr, m.close(ctx), stack.Stop())
	}
	return bridgeClient{base: "https://" + dialAddr(ln.Addr()), token: token, tls: clientTLS}, stop, nil
}

// proveThroughBridge starts dev-alice through the bridge and proves the
// running guest through it as a user would: the Debian guest's login
// prompt and SSH session, or the echo guest's answer on the console.
func proveThroughBridge(ctx context.Context, c bridgeClient, m *demoMachine, f demoFiles, out io.Writer) error {
	running, err := startThroughBridge(ctx, c, m, out)
	if err != nil {
		return err
	}
	if booted, ok := running.(*bootedGuest); ok {
		return proveGuest(ctx, booted, c, f, out)
	}
	return demoConsole(c, echoProof, out)
}

// showBridgeUsage prints how to reach dev-alice through the bridge at
// base: virtctl, curl and a browser, and SSH when sshPort is not 0.
func showBridgeUsage(out io.Writer, base string, f demoFiles, sshPort int) {
	vmPath := "/api/v1/namespaces/" + demoNamespace + "/virtualmachines/" + demoVM
	uiPath := "/ui/namespaces/" + demoNamespace + "/virtualmachines/" + demoVM
	kc := f.kubeconfig()
	fmt.Fprintf(out, `
The bridge serves on %s, with a certificate from the demo CA. For %s
(a ServiceAccount with the workstation-user role):
  her token:                %s
  the demo CA:              %s
  a kubeconfig for virtctl: %s (the bridge, the CA, her token)
Try (virtctl sends its token only over TLS, hence the CA):
  virtctl --kubeconfig %s console %s
  virtctl --kubeconfig %s vnc --proxy-only %s
  virtctl --kubeconfig %s vnc screenshot %s -f shot.png
  curl --cacert %s -H "Authorization: Bearer $(cat %s)" %s%s/sessions
  a browser (import the CA, or accept the warning):
    %s%s#mode=display&token=$(cat %s)
`, base, demoUser, f.token(), f.ca(), kc,
		kc, demoVM, kc, demoVM, kc, demoVM,
		f.ca(), f.token(), base, vmPath,
		base, uiPath, f.token())
	if sshPort != 0 {
		fmt.Fprintf(out, `  SSH in the browser: the page's SSH tab, user %s, the private key %s
  SSH from here, straight to the guest's forwarded port (not through the bridge):
    ssh -i %s -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null %s@127.0.0.1
`, demoUser, f.sshKey(), f.sshKey(), sshPort, demoUser)
	}
}

// echoVMI gives dev-alice a running instance whose console and display are
// the stack's echo machine (DEMO_GUEST=echo): a VMI made up here, as the
// demo did before it booted the real guest.
func echoVMI(ctx context.Context, env *testenv.Env, stack *bridgestack.Stack) error {
	guest := resource.MustParse("1Gi")
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoVM},
		// KubeVirt's own VMI admission runs in the demo's control plane.
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}}},
		// What virt-handler would report: the demo has no KubeVirt.
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running},
	}
	if err := env.Client.Create(ctx, vmi); err != nil {
		return fmt.Errorf("create the demo VMI: %w", err)
	}
	stack.Attach(demoNamespace, demoVM)
	return nil
}

// demoBridgeServer gives the demo user a token and the workstation-user
// role, and starts a bridge replica with opts.
func demoBridgeServer(ctx context.Context, env *testenv.Env, stack *bridgestack.Stack, tokenPath string, opts bridge.Options) (*bridge.Server, string, error) {
	token, err := stack.Token(ctx, demoNamespace, demoUser)
	if err != nil {
		return nil, "", err
	}
	if err := stack.BindWorkstationUser(ctx, demoNamespace, demoUser); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(tokenPath), 0o700); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(tokenPath, []byte(token), 0o600); err != nil {
		return nil, "", err
	}
	srv, err := bridge.NewFromConfig(ctx, stack.BridgeConfig, bridge.Config{
		Namespace: bridgestack.Namespace, Replica: "demo", Log: ctrl.Log.WithName("bridge"), Options: opts,
	})
	return srv, token, err
}

// bridgeClient reaches the demo's bridge as the demo user.
type bridgeClient struct {
	base, token string
	tls         *tls.Config
}

// dial opens the VM's route mode (console, vnc, ssh) as a WebSocket.
func (c bridgeClient) dial(mode string) (*websocket.Conn, *http.Response, error) {
	url := "wss" + strings.TrimPrefix(c.base, "https") + "/api/v1/namespaces/" + demoNamespace + "/virtualmachines/" + demoVM + "/" + mode
	dialer := &websocket.Dialer{TLSClientConfig: c.tls, HandshakeTimeout: demoIOTimeout}
	return dialer.Dial(url, http.Header{"Authorization": {"Bearer " + c.token}})
}

// demoStartTimeout bounds the start of dev-alice's guest: QEMU and the
// VMI, not the boot (proveGuest waits for that).
const demoStartTimeout = time.Minute

// startThroughBridge starts dev-alice as her browser does when she opens
// the stopped workstation: POST …/start through the bridge, as her. The
// bridge calls KubeVirt's start subresource (virtctl start's), and m boots
// the guest; it returns once the VMI runs.
func startThroughBridge(ctx context.Context, c bridgeClient, m *demoMachine, out io.Writer) (demoGuest, error) {
	sctx, cancel := context.WithTimeout(ctx, demoStartTimeout)
	defer cancel()
	resp, err := c.post(sctx, "start")
	if err != nil {
		return nil, fmt.Errorf("start %s through the bridge: %w", demoVM, err)
	}
	st := status(resp)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("start %s through the bridge: %s", demoVM, st)
	}
	g, err := m.waitRunning(sctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Started %s through the bridge as %s, as her browser does when she opens it stopped (POST …/start, then KubeVirt's start): %s\n", demoVM, demoUser, resp.Status)
	return g, nil
}

// post sends an empty POST to the VM's bridge route sub (start,
// keep-running) as the demo user.
func (c bridgeClient) post(ctx context.Context, sub string) (*http.Response, error) {
	url := c.base + "/api/v1/namespaces/" + demoNamespace + "/virtualmachines/" + demoVM + "/" + sub
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls}}
	return hc.Do(req)
}

// consoleProof is what the demo types on the console, what it waits for,
// and what it then says.
type consoleProof struct {
	send, want, said string
}

// echoProof: the echo guest answers in capitals.
var echoProof = consoleProof{
	send: "hello virtstation", want: "HELLO VIRTSTATION",
	said: `typed "hello virtstation", the guest answered "HELLO VIRTSTATION".`,
}

// loginProof: Enter at a getty prints its prompt again.
var loginProof = consoleProof{
	send: "\r", want: "login:",
	said: "pressed Enter, and the Debian login prompt came through the bridge:",
}

// demoConsole types p.send into the VM's serial console through the
// bridge, as a user would, waits for p.want, and shows that a second client
// is told who holds the console.
func demoConsole(c bridgeClient, p consoleProof, out io.Writer) error {
	conn, resp, err := c.dial("console")
	if err != nil {
		return fmt.Errorf("open the console through the bridge: %w (%s)", err, status(resp))
	}
	defer func() { _ = conn.Close() }()
	if err := conn.WriteMessage(websocket.BinaryMessage, []byte(p.send)); err != nil {
		return err
	}
	var got strings.Builder
	_ = conn.SetReadDeadline(time.Now().Add(demoIOTimeout))
	for !strings.Contains(got.String(), p.want) {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return fmt.Errorf("read the console (got %q): %w", got.String(), err)
		}
		got.Write(msg)
	}
	fmt.Fprintf(out, "Console through the bridge: %s", p.said)
	if line := lineWith(got.String(), p.want); line != p.want {
		fmt.Fprintf(out, " %q", line)
	}
	fmt.Fprintln(out)
	_, resp, err = c.dial("console")
	if err == nil {
		return errors.New("a second console session was let in while the first was open")
	}
	fmt.Fprintf(out, "A second client meanwhile gets %s\n", status(resp))
	return nil
}

// lineWith is the last line of s that holds want, trimmed.
func lineWith(s, want string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], want) {
			return strings.TrimSpace(lines[i])
		}
	}
	return want
}

func status(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.Status + ": " + strings.TrimSpace(string(b))
}
