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
	"os/exec"
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
	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/testenv"
)

// The demo's workstation: an example VM whose console and display are a
// real QEMU machine (a tiny guest that echoes the serial line in capitals).
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

// demoBridge runs the bridge on the demo control plane over TLS, proves it
// by typing into the console through it, writes the user's token, the demo
// CA and a kubeconfig for virtctl to f, and prints how to reach it. It
// returns a stop function; nil when QEMU is missing (the rest of the demo
// runs).
func demoBridge(ctx context.Context, env *testenv.Env, addr string, f demoFiles, out io.Writer) (func() error, error) {
	if _, err := exec.LookPath(qemu.Binary); err != nil {
		fmt.Fprintf(out, "\nSkipping the bridge: it needs QEMU for the VM's console and display (apt-get install qemu-system-x86).\n")
		return nil, nil
	}
	fmt.Fprintf(out, "\nStarting the bridge, with QEMU playing %s/%s's machine...\n", demoNamespace, demoVM)
	stack, err := bridgestack.Start(ctx, env.Config, env.FrontProxy, env.RepoRoot)
	if err != nil {
		return nil, err
	}
	// The bridge's own context: its Lease watch must end before the API
	// server is stopped.
	bctx, cancel := context.WithCancel(ctx)
	srv, token, err := demoBridgeServer(bctx, env, stack, f.token())
	if err != nil {
		cancel()
		return nil, errors.Join(err, stack.Stop())
	}
	serverTLS, clientTLS, err := demoTLS(f)
	if err != nil {
		cancel()
		return nil, errors.Join(err, stack.Stop())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("bridge address %s: %w (choose another with --bridge-address)", addr, err), stack.Stop())
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
		return errors.Join(closeErr, waitErr, stack.Stop())
	}

	base := "https://" + dialAddr(ln.Addr())
	if err := writeDemoKubeconfig(base, f); err != nil {
		return nil, errors.Join(err, stop())
	}
	if err := demoConsole(base, token, clientTLS, out); err != nil {
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
	return stop, nil
}

// demoBridgeServer gives the demo VM a running instance backed by QEMU, a
// user allowed to reach it, and a bridge replica.
func demoBridgeServer(ctx context.Context, env *testenv.Env, stack *bridgestack.Stack, tokenPath string) (*bridge.Server, string, error) {
	guest := resource.MustParse("1Gi")
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: demoVM},
		// KubeVirt's own VMI admission runs in the demo's control plane.
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}}},
		// What virt-handler would report: the demo has no KubeVirt.
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running},
	}
	if err := env.Client.Create(ctx, vmi); err != nil {
		return nil, "", fmt.Errorf("create the demo VMI: %w", err)
	}
	stack.Attach(demoNamespace, demoVM)
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
		Namespace: bridgestack.Namespace, Replica: "demo", Log: ctrl.Log.WithName("bridge"),
	})
	return srv, token, err
}

// demoConsole types into the VM's serial console through the bridge, as a
// user would, and shows that a second client is told who holds it.
func demoConsole(base, token string, clientTLS *tls.Config, out io.Writer) error {
	url := "wss" + strings.TrimPrefix(base, "https") + "/api/v1/namespaces/" + demoNamespace + "/virtualmachines/" + demoVM + "/console"
	h := http.Header{"Authorization": {"Bearer " + token}}
	dialer := &websocket.Dialer{TLSClientConfig: clientTLS, HandshakeTimeout: demoIOTimeout}
	c, resp, err := dialer.Dial(url, h)
	if err != nil {
		return fmt.Errorf("open the console through the bridge: %w (%s)", err, status(resp))
	}
	defer func() { _ = c.Close() }()
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("hello virtstation")); err != nil {
		return err
	}
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(demoIOTimeout))
	for !strings.Contains(got.String(), "HELLO VIRTSTATION") {
		_, p, err := c.ReadMessage()
		if err != nil {
			return fmt.Errorf("read the console: %w", err)
		}
		got.Write(p)
	}
	fmt.Fprintf(out, "Console through the bridge: typed \"hello virtstation\", the guest answered \"HELLO VIRTSTATION\".\n")
	_, resp, err = dialer.Dial(url, h)
	if err == nil {
		return errors.New("a second console session was let in while the first was open")
	}
	fmt.Fprintf(out, "A second client meanwhile gets %s\n", status(resp))
	return nil
}

func status(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.Status + ": " + strings.TrimSpace(string(b))
}
