package aggregation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// ioTimeout bounds each exchange through the API server.
const ioTimeout = 15 * time.Second

const (
	namespace = "default"
	vmName    = "vm1"
	basePath  = "/apis/subresources.kubevirt.io/v1/namespaces/" + namespace
)

var (
	cp      *testenv.ControlPlane
	handler *virthandler.Server
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// run starts the control plane with its front proxy, QEMU and the fake
// virt-handler, and registers the aggregated API.
func run(m *testing.M) (code int, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cp, err = testenv.StartControlPlane(testenv.WithAggregation()); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()

	dir, err := os.MkdirTemp("", "aggregation")
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	vm, err := qemu.Start(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, vm.Stop()) }()

	handler, err = virthandler.Start(ctx, virthandler.Options{
		FrontProxyCA: cp.FrontProxy.CA,
		AllowedNames: []string{testenv.FrontProxyClientName},
		DNSNames:     []string{testenv.SubresourceServerName},
	})
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, handler.Close()) }()
	handler.Register(namespace, vmName, virthandler.Target{Console: vm.SerialSocket, VNC: vm.VNCSocket})

	if err := testenv.RegisterSubresourceAPI(ctx, cp.Config, handler.Port(), handler.CABundle()); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// dial opens a subresource WebSocket through the API server as cfg's user,
// the way the bridge and virtctl do.
func dial(t *testing.T, cfg *rest.Config, path string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := apiURL(t, cfg, path)
	u.Scheme = "wss"
	header := http.Header{}
	if cfg.BearerToken != "" {
		header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	d := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{virthandler.Subprotocol}, HandshakeTimeout: ioTimeout}
	ws, resp, err := d.Dial(u.String(), header)
	if err == nil {
		t.Cleanup(func() { _ = ws.Close() })
	}
	return ws, resp, err
}

// apiURL is path (with its query) on cfg's API server.
func apiURL(t *testing.T, cfg *rest.Config, path string) *url.URL {
	t.Helper()
	host, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	return host.ResolveReference(ref)
}

func mustDial(t *testing.T, cfg *rest.Config, path string) *websocket.Conn {
	t.Helper()
	ws, resp, err := dial(t, cfg, path)
	if err != nil {
		t.Fatalf("dial %s: %v (%s)", path, err, statusOf(resp))
	}
	if ws.Subprotocol() != virthandler.Subprotocol {
		t.Errorf("subprotocol %q, want %q", ws.Subprotocol(), virthandler.Subprotocol)
	}
	return ws
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
}

// readUntil reads messages until their concatenation contains want.
func readUntil(t *testing.T, ws *websocket.Conn, want string) {
	t.Helper()
	if err := ws.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %q: %v (got %q)", want, err, got)
		}
		got = append(got, msg...)
	}
}

func send(t *testing.T, ws *websocket.Conn, msg string) {
	t.Helper()
	if err := ws.SetWriteDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// closeAndWait closes ws and waits until the fake virt-handler has let go,
// so the next test finds the VMI free.
func closeAndWait(t *testing.T, ws *websocket.Conn, kind virthandler.Kind) {
	t.Helper()
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(ioTimeout)
	for handler.Open(namespace, vmName, kind) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s connection still open at the virt-handler after the client closed", kind)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastCall is the newest call of a kind by user, if any.
func lastCall(kind virthandler.Kind, user string) (virthandler.Call, bool) {
	calls := handler.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Kind == kind && calls[i].User == user {
			return calls[i], true
		}
	}
	return virthandler.Call{}, false
}

func TestVNCThroughTheAPIServer(t *testing.T) {
	vnc := basePath + "/virtualmachineinstances/" + vmName + "/vnc?preserveSession=true"
	ws := mustDial(t, cp.Config, vnc)
	readUntil(t, ws, "RFB 003.008\n")

	// A second viewer with preserveSession is refused while the first is
	// connected, and the refusal crosses the API server unchanged.
	_, resp, err := dial(t, cp.Config, vnc)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second VNC dial with preserveSession: %v (%s), want HTTP 503", err, statusOf(resp))
	}
	call, ok := lastCall(virthandler.VNC, "admin")
	if !ok || call.Status != http.StatusServiceUnavailable || !call.PreserveSession {
		t.Errorf("last VNC call by admin %+v, want a refused preserveSession call", call)
	}
	closeAndWait(t, ws, virthandler.VNC)
}

func TestConsoleThroughTheAPIServer(t *testing.T) {
	ws := mustDial(t, cp.Config, basePath+"/virtualmachineinstances/"+vmName+"/console")
	readUntil(t, ws, qemu.Banner)
	send(t, ws, "hi")
	readUntil(t, ws, "HI")
	closeAndWait(t, ws, virthandler.Console)
}

func TestUnknownVMIThroughTheAPIServer(t *testing.T) {
	_, resp, err := dial(t, cp.Config, basePath+"/virtualmachineinstances/nope/console")
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("console of an unknown VMI: %v (%s), want HTTP 404", err, statusOf(resp))
	}
}

func TestRestartThroughTheAPIServer(t *testing.T) {
	client, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	before := len(handler.Restarts())
	path := apiURL(t, cp.Config, basePath+"/virtualmachines/"+vmName+"/restart").String()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, path, strings.NewReader(`{"gracePeriodSeconds":0}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("restart through the API server: %s, want 202 Accepted (PUT %s)", resp.Status, path)
	}
	restarts := handler.Restarts()
	if len(restarts) != before+1 {
		t.Fatalf("restarts recorded %+v, want one more", restarts)
	}
	r := restarts[len(restarts)-1]
	if r.User != "admin" || r.RestartOptions == nil || r.RestartOptions.GracePeriodSeconds == nil || *r.RestartOptions.GracePeriodSeconds != 0 {
		t.Errorf("restart recorded %+v, want admin's, with gracePeriodSeconds 0", r)
	}
}

// TestRBACAppliesBeforeTheProxy dials as a ServiceAccount, as the bridge
// does: without a Role the API server answers 403 and the virt-handler never
// hears of it; with get on virtualmachineinstances/vnc it connects, and the
// virt-handler sees the ServiceAccount.
func TestRBACAppliesBeforeTheProxy(t *testing.T) {
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	const sa = "bridge"
	user := "system:serviceaccount:" + namespace + ":" + sa
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saConfig := rest.AnonymousClientConfig(cp.Config)
	saConfig.BearerToken = tr.Status.Token

	vnc := basePath + "/virtualmachineinstances/" + vmName + "/vnc?preserveSession=true"
	_, resp, err := dial(t, saConfig, vnc)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("VNC as a ServiceAccount without RBAC: %v (%s), want HTTP 403", err, statusOf(resp))
	}
	if call, ok := lastCall(virthandler.VNC, user); ok {
		t.Fatalf("the virt-handler saw a forbidden call: %+v", call)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "vnc"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"subresources.kubevirt.io"},
			Resources: []string{"virtualmachineinstances/vnc"},
			Verbs:     []string{"get"},
		}},
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vnc"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}},
	}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of the binding through its informer.
	var ws *websocket.Conn
	deadline := time.Now().Add(ioTimeout)
	for {
		ws, resp, err = dial(t, saConfig, vnc)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("VNC as a ServiceAccount with RBAC: %v (%s)", err, statusOf(resp))
	}
	readUntil(t, ws, "RFB 003.008\n")
	if call, ok := lastCall(virthandler.VNC, user); !ok || call.Status != http.StatusSwitchingProtocols {
		t.Errorf("the virt-handler's last VNC call by %s: %+v, %v; want an upgraded call", user, call, ok)
	}

	// The Role grants VNC only.
	_, resp, err = dial(t, saConfig, basePath+"/virtualmachineinstances/"+vmName+"/console")
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("console with a VNC-only Role: %v (%s), want HTTP 403", err, statusOf(resp))
	}
	closeAndWait(t, ws, virthandler.VNC)
}
