package bridge

import (
	"context"
	"k8s.io/apimachinery/pkg/runtime"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/browser"
	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// starters play virt-controller for the VMs a test lets start, by name.
var starters sync.Map // name -> func(context.Context, *kubevirtv1.VirtualMachine)

// playStart is the stand-in virt-api's OnStart: the test's starter for the
// VM, if any.
func playStart(ctx context.Context, vm *kubevirtv1.VirtualMachine) {
	if f, ok := starters.Load(vm.Name); ok {
		f.(func(context.Context, *kubevirtv1.VirtualMachine))(ctx, vm)
	}
}

// haltedVM stores a stopped VM name in team-a (runStrategy Halted, no VMI)
// whose start, once KubeVirt accepts it, creates a running VMI and serves
// its console and display from a QEMU of its own, after delay.
func haltedVM(t *testing.T, name string, delay time.Duration) {
	t.Helper()
	ctx := testContext(t)
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		}},
	}
	if err := admin.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.WithoutCancel(ctx), vm) })
	dir := t.TempDir()
	started := make(chan struct{})
	starters.Store(name, func(hctx context.Context, _ *kubevirtv1.VirtualMachine) {
		defer close(started)
		select {
		case <-time.After(delay): // long enough for the page to show its progress
		case <-hctx.Done():
			return
		}
		machine, err := qemu.Start(context.WithoutCancel(ctx), dir)
		if err != nil {
			t.Errorf("start QEMU: %v", err)
			return
		}
		t.Cleanup(func() { _ = machine.Stop() })
		vmi := &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
			Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running},
		}
		handler.Register(userNS, name, virthandler.Target{Console: machine.SerialSocket, VNC: machine.VNCSocket})
		if err := admin.Create(hctx, vmi); err != nil {
			t.Errorf("create the VMI: %v", err)
			return
		}
		t.Cleanup(func() { _ = admin.Delete(context.WithoutCancel(ctx), vmi) })
	})
	t.Cleanup(func() {
		starters.Delete(name)
		handler.Unregister(userNS, name)
	})
}

// consoleOnly makes a user of team-a who may open consoles and displays
// and see VMs, but not start them.
func consoleOnly(t *testing.T, name string) string {
	t.Helper()
	ctx := testContext(t)
	tok, err := stack.Token(ctx, userNS, name)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines", "virtualmachineinstances"}, Verbs: []string{"get"}},
			{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/console", "virtualmachineinstances/vnc"}, Verbs: []string{"get"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: userNS}},
	}
	scheme := runtime.NewScheme()
	if err := rbacv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rbac, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{role, rb} {
		if err := rbac.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.Delete(context.WithoutCancel(ctx), obj) })
	}
	tokens[name] = tok
	return tok
}

func TestBrowserStartsAStoppedVM(t *testing.T) {
	b := browser.Start(t)

	t.Run("start on connect then the console then the idle banner", func(t *testing.T) {
		const name = "ws-halted"
		haltedVM(t, name, 3*time.Second)
		url := strings.Replace(vmPageURL(replicaA.URL, name, tokens["alice"], "serial"), "#", "?progress_interval=300&status_interval=500#", 1)
		alice := b.Open(t, "start-alice", url)
		alice.WaitFor(`!document.getElementById('progress').hidden`)
		alice.Screenshot("progress")
		alice.WaitState("connected")
		var progressHidden bool
		alice.Eval(`document.getElementById('progress').hidden`, &progressHidden)
		if !progressHidden {
			t.Errorf("the progress page stayed after connecting")
		}
		alice.TypeInto("#terminal", "hello")
		alice.WaitText(terminalRows, "HELLO")
		if got := len(handler.Accepted(virthandler.StartVM)); got < 1 {
			t.Errorf("accepted starts %d, want 1", got)
		}
		if !strings.Contains(scrape(t, replicaA.URL), "virtstation_bridge_start_to_connected_seconds_count 1") {
			t.Errorf("start-to-connected not observed")
		}

		// The lifecycle gives notice: the banner appears, counting down.
		vm := &kubevirtv1.VirtualMachine{}
		if err := admin.Get(testContext(t), client.ObjectKey{Namespace: userNS, Name: name}, vm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(vm.DeepCopy())
		// A managed VM's: the bridge shows no notice on any other.
		vm.Labels = map[string]string{api.LabelManaged: api.LabelTrue}
		vm.Annotations = map[string]string{api.AnnotationIdleStopAt: time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}
		if err := admin.Patch(testContext(t), vm, patch); err != nil {
			t.Fatal(err)
		}
		alice.WaitText("#idle-banner-text", "because it has been idle")
		alice.Screenshot("banner")
		alice.CheckClean()
	})

	t.Run("a user who may not start is told why", func(t *testing.T) {
		const name = "ws-halted-2"
		haltedVM(t, name, 0)
		tok := consoleOnly(t, "carol")
		carol := b.Open(t, "start-carol", vmPageURL(replicaA.URL, name, tok, "serial"))
		st := carol.WaitState("refused")
		if !strings.Contains(st.Text, "update on virtualmachines/start") {
			t.Errorf("refusal %q does not name the permission", st.Text)
		}
		if n := len(handler.Accepted(virthandler.StartVM)); n > 1 {
			t.Errorf("a start was made for carol")
		}
	})
}
