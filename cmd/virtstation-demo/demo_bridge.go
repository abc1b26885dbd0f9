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

// demoBridge runs the bridge on the demo control plane over TLS, with the
// guest g playing dev-alice's machine, proves it through the bridge as a
// user would, writes the user's token, the demo CA and a kubeconfig for
// virtctl to f, and prints how to reach it. It returns a stop function,
// which also stops the guest.
func demoBridge(ctx context.Context, env *testenv.Env, addr string, f demoFiles, g guest, out io.Writer) (func() error, error) {
	var opts []bridgestack.Option
	if g.mode == debianGuest {
		// dev-alice's own machine; the stack's echo machine is not needed.
		opts = append(opts, bridgestack.WithoutQEMU())
		fmt.Fprintf(out, "\nStarting the bridge, and dev-alice as KubeVirt would start it (the VMI from KubeVirt's own code, the VM's disks as virt-launcher presents them)...\n")
	} else {
		fmt.Fprintf(out, "\nStarting the bridge, with QEMU playing %s/%s's machine...\n", demoNamespace, demoVM)
	}
	stack, err := bridgestack.Start(ctx, env.Config, env.FrontProxy, env.RepoRoot, opts...)
	if err != nil {
		return nil, err
	}
	// The bridge's own context: its Lease watch must end before the API
	// server is stopped.
	bctx, cancel := context.WithCancel(ctx)
	var booted *bootedGuest
	var bridgeOpts bridge.Options
	if g.mode == debianGuest {
		booted, err = bootGuest(bctx, env, stack, g.image, f, out)
		if booted != nil {
			bridgeOpts.SSHPort = booted.sshPort
		}
	} else {
		err = echoVMI(bctx, env, stack)
	}
	stopGuest := func() error {
		if booted == nil {
			return nil
		}
		return booted.stop(ctx)
	}
	if err != nil {
		cancel()
		return nil, errors.Join(err, stopGuest(), stack.Stop())
	}
	srv, token, err := demoBridgeServer(bctx, env, stack, f.token(), bridgeOpts)
	if err != nil {
		cancel()
		return nil, errors.Join(err, stopGuest(), stack.Stop())
	}
	serverTLS, clientTLS, err := demoTLS(f)
	if err != nil {
		cancel()
		return nil, errors.Join(err, stopGuest(), stack.Stop())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("bridge address %s: %w (choose another with --bridge-address)", addr, err), stopGuest(), stack.Stop())
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
		return errors.Join(closeErr, waitErr, stopGuest(), stack.Stop())
	}

	base := "https://" + dialAddr(ln.Addr())
	if err := writeDemoKubeconfig(base, f); err != nil {
		return nil, errors.Join(err, stop())
	}
	c := bridgeClient{base: base, token: token, tls: clientTLS}
	if booted != nil {
		err = proveGuest(ctx, booted, c, f, out)
	} else {
		err = demoConsole(c, echoProof, out)
	}
	if err != nil {
		return nil, errors.Join(err, stop())
	}
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
	if booted != nil {
		fmt.Fprintf(out, `  SSH in the browser: the page's SSH tab, user %s, the private key %s
  SSH from here, straight to the guest's forwarded port (not through the bridge):
    ssh -i %s -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null %s@127.0.0.1
`, demoUser, f.sshKey(), f.sshKey(), booted.sshPort, demoUser)
	}
	return stop, nil
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
