package virthandler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/testenv"
)

// shared is a control plane with KubeVirt's CRDs, started by the first test
// that stores VMs.
var shared = testenv.Shared{Options: []testenv.Option{testenv.WithCRDs()}}

func TestMain(m *testing.M) { shared.Main(m) }

// storeClient is an administrator's client of the shared control plane.
func storeClient(t *testing.T) client.Client {
	t.Helper()
	cp := shared.Get(t)
	scheme := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lifecycleFixture is a server with a Client, its hooks reporting the VMs
// they were given.
type lifecycleFixture struct {
	*fixture
	store            client.Client
	started, stopped chan *kubevirtv1.VirtualMachine
}

func newLifecycleFixture(t *testing.T) *lifecycleFixture {
	t.Helper()
	store := storeClient(t)
	lf := &lifecycleFixture{store: store, started: make(chan *kubevirtv1.VirtualMachine, 4), stopped: make(chan *kubevirtv1.VirtualMachine, 4)}
	lf.fixture = newFixtureWith(t, Options{
		Client:  store,
		OnStart: func(_ context.Context, vm *kubevirtv1.VirtualMachine) { lf.started <- vm },
		OnStop:  func(_ context.Context, vm *kubevirtv1.VirtualMachine) { lf.stopped <- vm },
	})
	return lf
}

// createVM stores a VM named name in default with the run strategy.
func (lf *lifecycleFixture) createVM(t *testing.T, name string, strategy kubevirtv1.VirtualMachineRunStrategy) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &strategy,
			Template:    &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{}}}},
		},
	}
	if err := lf.store.Create(t.Context(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lf.store.Delete(context.Background(), vm) })
}

// createVMI stores a VMI named name in default with the phase and
// conditions virt-handler would have written.
func (lf *lifecycleFixture) createVMI(t *testing.T, name string, phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceConditionType) {
	t.Helper()
	// KubeVirt's VMI has no status subresource: the status is stored as
	// given.
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	vmi.Status.Phase = phase
	for _, c := range conds {
		vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
	}
	if err := lf.store.Create(t.Context(), vmi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lf.store.Delete(context.Background(), vmi) })
}

func (lf *lifecycleFixture) runStrategy(t *testing.T, name string) kubevirtv1.VirtualMachineRunStrategy {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := lf.store.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	return *vm.Spec.RunStrategy
}

// call sends method path as the front proxy would and returns the status
// and the Status message or body.
func (f *fixture) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "https://"+f.srv.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "alice")
	resp, err := f.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	if resp.StatusCode >= 300 && json.Unmarshal(b, &st) == nil {
		return resp.StatusCode, st.Message
	}
	return resp.StatusCode, string(b)
}

func vmPath(name, sub string) string {
	return basePath + "/namespaces/default/virtualmachines/" + name + "/" + sub
}

func vmiPath(name, sub string) string {
	return basePath + "/namespaces/default/virtualmachineinstances/" + name + "/" + sub
}

func receive(t *testing.T, ch <-chan *kubevirtv1.VirtualMachine, what string) *kubevirtv1.VirtualMachine {
	t.Helper()
	select {
	case vm := <-ch:
		return vm
	case <-time.After(ioTimeout):
		t.Fatalf("no %s hook call", what)
		return nil
	}
}

func TestStartAndStopChangeTheStoredVM(t *testing.T) {
	lf := newLifecycleFixture(t)
	lf.createVM(t, "halted", kubevirtv1.RunStrategyHalted)

	if code, msg := lf.call(t, http.MethodPut, vmPath("halted", "stop"), ""); code != http.StatusConflict || msg != `Operation cannot be fulfilled on virtualmachine.kubevirt.io "halted": VM is not running` {
		t.Errorf("stop of a halted VM: %d %q, want 409 VM is not running", code, msg)
	}
	if code, msg := lf.call(t, http.MethodPut, vmPath("halted", "start"), ""); code != http.StatusAccepted {
		t.Fatalf("start: %d %s, want 202", code, msg)
	}
	if vm := receive(t, lf.started, "start"); *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Errorf("OnStart got runStrategy %s, want Always", *vm.Spec.RunStrategy)
	}
	if got := lf.runStrategy(t, "halted"); got != kubevirtv1.RunStrategyAlways {
		t.Errorf("stored runStrategy after start %s, want Always", got)
	}
	// The test plays virt-controller: the VMI runs.
	lf.createVMI(t, "halted", kubevirtv1.Running)
	if code, msg := lf.call(t, http.MethodPut, vmPath("halted", "start"), ""); code != http.StatusConflict || !strings.HasSuffix(msg, "VM is already running") {
		t.Errorf("second start: %d %q, want 409 VM is already running", code, msg)
	}
	if code, msg := lf.call(t, http.MethodPut, vmPath("halted", "stop"), ""); code != http.StatusAccepted {
		t.Fatalf("stop: %d %s, want 202", code, msg)
	}
	receive(t, lf.stopped, "stop")
	if got := lf.runStrategy(t, "halted"); got != kubevirtv1.RunStrategyHalted {
		t.Errorf("stored runStrategy after stop %s, want Halted", got)
	}
	if n := len(lf.srv.Accepted(StartVM)); n != 1 {
		t.Errorf("accepted starts %d, want 1", n)
	}
}

func TestStartRefusals(t *testing.T) {
	lf := newLifecycleFixture(t)
	lf.createVM(t, "always", kubevirtv1.RunStrategyAlways)
	cases := map[string]struct {
		path, body string
		code       int
		msg        string
	}{
		"always":     {vmPath("always", "start"), "", http.StatusConflict, "Always does not support manual start requests"},
		"unknown VM": {vmPath("nope", "start"), "", http.StatusNotFound, `virtualmachine.kubevirt.io "nope" not found`},
		"bad body":   {vmPath("always", "start"), "{", http.StatusBadRequest, "Can not unmarshal Request body to struct"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, msg := lf.call(t, http.MethodPut, tc.path, tc.body)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %q, want %d %q", code, msg, tc.code, tc.msg)
			}
		})
	}
	select {
	case vm := <-lf.started:
		t.Errorf("OnStart called for %s after a refusal", vm.Name)
	default:
	}
}

func TestManualStartAsksVirtController(t *testing.T) {
	lf := newLifecycleFixture(t)
	lf.createVM(t, "manual", kubevirtv1.RunStrategyManual)
	if code, msg := lf.call(t, http.MethodPut, vmPath("manual", "start"), ""); code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, msg)
	}
	vm := receive(t, lf.started, "start")
	if len(vm.Status.StateChangeRequests) != 1 || vm.Status.StateChangeRequests[0].Action != kubevirtv1.StartRequest {
		t.Errorf("state change requests %+v, want one start", vm.Status.StateChangeRequests)
	}
	if got := lf.runStrategy(t, "manual"); got != kubevirtv1.RunStrategyManual {
		t.Errorf("runStrategy %s, want Manual kept", got)
	}
	// A second request while the first is pending is refused, as virt-api does.
	if code, msg := lf.call(t, http.MethodPut, vmPath("manual", "start"), ""); code != http.StatusInternalServerError || !strings.Contains(msg, "stop/start already underway") {
		t.Errorf("second start: %d %q", code, msg)
	}
}

func TestGuestAgentCalls(t *testing.T) {
	lf := newLifecycleFixture(t)
	lf.createVMI(t, "pending", kubevirtv1.Scheduling)
	lf.createVMI(t, "noagent", kubevirtv1.Running)
	lf.createVMI(t, "agent", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceAgentConnected)
	users := []kubevirtv1.VirtualMachineInstanceGuestOSUser{{UserName: "alice", LoginTime: 1700000000}}
	lf.srv.SetUsers("default", "agent", users)
	lf.srv.SetUsers("default", "noagent", users)
	lf.srv.SetGuestOSInfo("default", "agent", &kubevirtv1.VirtualMachineInstanceGuestAgentInfo{Hostname: "ws1"})
	cases := map[string]struct {
		path string
		code int
		want string
	}{
		"no VMI":            {vmiPath("nope", "userlist"), http.StatusNotFound, `virtualmachineinstance.kubevirt.io "nope" not found`},
		"not running":       {vmiPath("pending", "userlist"), http.StatusConflict, "VMI is not running"},
		"no agent":          {vmiPath("noagent", "guestosinfo"), http.StatusConflict, "VMI does not have guest agent connected"},
		"users":             {vmiPath("agent", "userlist"), http.StatusOK, `"items":[{"userName":"alice","loginTime":1700000000}]`},
		"guest os info":     {vmiPath("agent", "guestosinfo"), http.StatusOK, `"hostname":"ws1"`},
		"info has userList": {vmiPath("agent", "guestosinfo"), http.StatusOK, `"userList":[{"userName":"alice"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, body := lf.call(t, http.MethodGet, tc.path, "")
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%d %q, want %d containing %q", code, body, tc.code, tc.want)
			}
		})
	}
}

func TestGuestAgentWithoutClient(t *testing.T) {
	f := newFixture(t)
	if code, msg := f.call(t, http.MethodGet, vmiPath("vm1", "userlist"), ""); code != http.StatusConflict || !strings.HasSuffix(msg, vmiGuestAgentErr) {
		t.Errorf("no agent: %d %q", code, msg)
	}
	f.srv.SetUsers("default", "vm1", []kubevirtv1.VirtualMachineInstanceGuestOSUser{})
	if code, body := f.call(t, http.MethodGet, vmiPath("vm1", "userlist"), ""); code != http.StatusOK || !strings.Contains(body, `"items":[]`) {
		t.Errorf("agent with no users: %d %q", code, body)
	}
	f.srv.SetUsers("default", "vm1", nil)
	if code, _ := f.call(t, http.MethodGet, vmiPath("vm1", "userlist"), ""); code != http.StatusConflict {
		t.Errorf("after SetUsers(nil): %d, want 409", code)
	}
	if code, _ := f.call(t, http.MethodPut, vmPath("vm1", "start"), ""); code != http.StatusInternalServerError {
		t.Errorf("start without a Client: %d, want 500", code)
	}
}

func TestChangePatches(t *testing.T) {
	uid := "vmi-uid"
	running := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "vmi-uid"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	withStrategy := func(s kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(s)}}
	}
	cases := map[string]struct {
		got    func() (change, *apierrors.StatusError)
		patch  string
		status bool
	}{
		"start halted": {func() (change, *apierrors.StatusError) {
			return startChange(withStrategy(kubevirtv1.RunStrategyHalted), nil, false)
		},
			`[{"op":"test","path":"/spec/runStrategy","value":"Halted"},{"op":"replace","path":"/spec/runStrategy","value":"Always"}]`, false},
		"start spec.running false": {func() (change, *apierrors.StatusError) {
			return startChange(&kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Running: ptr.To(false)}}, nil, false)
		}, `[{"op":"test","path":"/spec/running","value":false},{"op":"replace","path":"/spec/running","value":true}]`, false},
		"stop always": {func() (change, *apierrors.StatusError) {
			return stopChange(withStrategy(kubevirtv1.RunStrategyAlways), running, false)
		},
			`[{"op":"test","path":"/spec/runStrategy","value":"Always"},{"op":"replace","path":"/spec/runStrategy","value":"Halted"}]`, false},
		"stop manual": {func() (change, *apierrors.StatusError) {
			return stopChange(withStrategy(kubevirtv1.RunStrategyManual), running, false)
		},
			`[{"op":"add","path":"/status","value":{"stateChangeRequests":[{"action":"Stop","uid":"` + uid + `"}]}}]`, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, serr := tc.got()
			if serr != nil {
				t.Fatal(serr)
			}
			if string(c.patch) != tc.patch || c.status != tc.status {
				t.Errorf("patch %s (status %v), want %s (status %v)", c.patch, c.status, tc.patch, tc.status)
			}
		})
	}
}
