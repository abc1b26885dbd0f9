package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// ioTimeout bounds one read in a test.
const ioTimeout = 15 * time.Second

// guestReported is the address the guests of spoof and nopod report in
// their VMI's status.interfaces; trap listens there, and the bridge must
// never dial it.
const guestReported = "127.0.0.2"

// vmFixture is one test VM: its VMI's status (nil: stopped, no VMI) and
// the address of its virt-launcher pod ("": none).
type vmFixture struct {
	status   *kubevirtv1.VirtualMachineInstanceStatus
	launcher string
}

// createVMs makes the VMs the tests open:
//
//	ws1      running, its console and VNC piped to QEMU, its launcher pod at 127.0.0.1, where sshd is
//	off      stopped (no VMI)
//	booting  its VMI is still scheduling
//	noguest  running, its launcher pod at an address where nothing answers SSH
//	spoof    running, its launcher pod at 127.0.0.1, its guest reporting guestReported
//	nopod    running, no launcher pod (yet), its guest reporting guestReported
func createVMs(ctx context.Context) error {
	reported := []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: guestReported}}
	vms := map[string]vmFixture{
		"ws1":     {status: &kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "127.0.0.1"}}}, launcher: "127.0.0.1"},
		"off":     {},
		"booting": {status: &kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling}},
		"noguest": {status: &kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Interfaces: reported}, launcher: "127.0.0.3"},
		"spoof":   {status: &kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Interfaces: reported}, launcher: "127.0.0.1"},
		"nopod":   {status: &kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, Interfaces: reported}},
	}
	for name, f := range vms {
		always := kubevirtv1.RunStrategyAlways
		vm := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
			}},
		}
		if err := admin.Create(ctx, vm); err != nil {
			return err
		}
		if f.status == nil {
			continue
		}
		vmi := &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
			// The VMI CRD used here has no status subresource: status is
			// written with the object, as virt-handler would report it.
			Status: *f.status,
		}
		if err := admin.Create(ctx, vmi); err != nil {
			return err
		}
		if f.launcher == "" {
			continue
		}
		if err := bridgestack.Launch(ctx, admin, vmi, f.launcher); err != nil {
			return err
		}
		if err := admin.Update(ctx, vmi); err != nil {
			return fmt.Errorf("record the launcher pod of %s: %w", name, err)
		}
	}
	return nil
}

func sshPort() int {
	_, port, _ := net.SplitHostPort(sshd1.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

func vmPath(name, mode string) string {
	return "/api/v1/namespaces/" + userNS + "/virtualmachines/" + name + "/" + mode
}

// vmiPath is KubeVirt's own path of a VMI's subresource, at version v.
func vmiPath(v, name, sub string) string {
	return "/apis/subresources.kubevirt.io/" + v + "/namespaces/" + userNS + "/virtualmachineinstances/" + name + "/" + sub
}

func wsURL(server, path string) string { return "ws" + strings.TrimPrefix(server, "http") + path }

// dialCLI dials as a CLI does: the token in the Authorization header.
func dialCLI(t *testing.T, server, path, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{Subprotocols: []string{virthandler.Subprotocol}, HandshakeTimeout: ioTimeout}
	c, resp, err := d.Dial(wsURL(server, path), h)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, resp, err
}

// dialBrowser dials as the built-in client does from a page the bridge
// served: the token in the subprotocol, the bridge's own Origin.
func dialBrowser(t *testing.T, server, path, token string) (*websocket.Conn, error) {
	t.Helper()
	h := http.Header{"Origin": {server}}
	d := websocket.Dialer{HandshakeTimeout: ioTimeout, Subprotocols: []string{
		"binary", auth.BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token)),
	}}
	c, resp, err := d.Dial(wsURL(server, path), h)
	if err != nil {
		if resp != nil {
			return nil, errors.New(resp.Status)
		}
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

// mustDial dials as a CLI and fails the test on any refusal.
func mustDial(t *testing.T, server, path, token string) *websocket.Conn {
	t.Helper()
	c, resp, err := dialCLI(t, server, path, token)
	if err != nil {
		t.Fatalf("dial %s: %v (%s)", path, err, body(resp))
	}
	return c
}

// status is the Kubernetes Status the bridge answers refusals with.
type status struct {
	Kind    string `json:"kind"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Code    int    `json:"code"`
	Holder  *struct {
		User  string    `json:"user"`
		Since time.Time `json:"since"`
	} `json:"holder"`
}

func body(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}

// refusal dials as a CLI and returns the HTTP status and Status body.
func refusal(t *testing.T, server, path, token string) (int, status) {
	t.Helper()
	_, resp, err := dialCLI(t, server, path, token)
	if err == nil {
		t.Fatalf("dial %s succeeded, want a refusal", path)
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	var st status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("refusal body of %s is not a Status: %v", path, err)
	}
	return resp.StatusCode, st
}

// readUntil reads binary messages until the accumulated text contains want.
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

// closeFrame reads until c's close frame and returns it.
func closeFrame(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	for {
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		if err != nil {
			t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

func send(t *testing.T, c *websocket.Conn, kind int, p string) {
	t.Helper()
	if err := c.WriteMessage(kind, []byte(p)); err != nil {
		t.Fatal(err)
	}
}

// request makes a plain HTTP request as the token's user.
func request(t *testing.T, method, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// waitUpstreamClosed waits until the stand-in virt-api has no open
// connection of kind for ws1, so the next VNC dial is not refused as busy.
func waitUpstreamClosed(t *testing.T, kind virthandler.Kind) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for handler.Open(userNS, "ws1", kind) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the %s upstream of ws1 is still open", kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func user(name string) string { return "system:serviceaccount:" + userNS + ":" + name }
