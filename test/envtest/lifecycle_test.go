package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/lifecycle"
)

// The lifecycle tests run the webhook manager's lifecycle controller (as
// installed by testenv.Start) against the real API server, with the
// virt-api stand-in serving KubeVirt's stop and userlist subresources
// through the aggregation layer; the test plays virt-controller (the VMI
// is created when a VM starts and deleted when it stops). Durations are
// seconds.
var (
	kubeVirtAPIOnce sync.Once
	kubeVirtAPI     *virthandler.Server
	kubeVirtAPIErr  error
)

// subresourceAPI serves KubeVirt's subresources for the shared env, once.
func subresourceAPI(t *testing.T) *virthandler.Server {
	t.Helper()
	kubeVirtAPIOnce.Do(func() {
		ctx := context.Background()
		kubeVirtAPI, kubeVirtAPIErr = virthandler.Start(ctx, virthandler.Options{
			FrontProxyCA: env.FrontProxy.CA,
			AllowedNames: []string{testenv.FrontProxyClientName},
			DNSNames:     []string{testenv.SubresourceServerName},
			Client:       env.Client,
			OnStop: func(ctx context.Context, vm *kubevirtv1.VirtualMachine) {
				// virt-controller: the VMI of a Halted VM goes.
				_ = env.Client.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name}})
			},
		})
		if kubeVirtAPIErr == nil {
			kubeVirtAPIErr = testenv.RegisterSubresourceAPI(ctx, env.Config, kubeVirtAPI.Port(), kubeVirtAPI.CABundle())
		}
	})
	if kubeVirtAPIErr != nil {
		t.Fatal(kubeVirtAPIErr)
	}
	return kubeVirtAPI
}

// idleVM builds a running managed VM whose root disk is a Bound PVC (so a
// stop loses nothing), with the lifecycle annotations given.
func idleVM(t *testing.T, ns, name string, annotations map[string]string) *kubevirtv1.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-root"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := env.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	opts := []vmOption{managed, func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
		vm.Spec.Template.Spec.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
		}}
	}}
	for k, v := range annotations {
		opts = append(opts, withAnnotation(k, v))
	}
	return createRunning(t, newVM(ns, name, opts...))
}

// createRunning stores vm and its VMI, Running, as KubeVirt would.
func createRunning(t *testing.T, vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
	if err := env.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi, err := env.StartVM(ctx, vm.Namespace, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{
		{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue},
	}
	// KubeVirt's VMI CRD has no status subresource: status is written
	// with the object, as virt-handler does.
	if err := env.Client.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	return vm
}

// vmNow reads the stored VM.
func vmNow(t *testing.T, ns, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

func halted(vm *kubevirtv1.VirtualMachine) bool {
	return vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted
}

// hasEvent says whether an Event of reason whose note contains text is
// recorded regarding the VM.
func idleEvent(t *testing.T, ns, name, reason, text string) error {
	t.Helper()
	var seen []string
	for _, e := range eventsFor(t, ns, name) {
		if e.Reason == reason && strings.Contains(e.Note, text) {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Note)
	}
	return fmt.Errorf("no %s Event with %q among %q", reason, text, seen)
}

// touch records bridge input for the VM, as package bridge/activity does.
func touch(t *testing.T, ns, name string, mutate func(*coordinationv1.Lease)) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: testenv.InstallNamespace, Name: api.ActivityLeaseName(ns, name)}
	err := env.Client.Get(ctx, key, l)
	if err != nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{api.LabelRole: api.RoleActivity, api.LabelVM: api.VMHash(ns, name)},
			Annotations: map[string]string{api.AnnotationVMNamespace: ns, api.AnnotationVMName: name}}}
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	l.Spec.HolderIdentity = ptr.To("bridge vnc input")
	if mutate != nil {
		mutate(l)
	}
	if err != nil {
		err = env.Client.Create(ctx, l)
	} else {
		err = env.Client.Update(ctx, l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestIdleStop drives the state machine through the API server: idle,
// notice (annotation and Event), grace, stop as KubeVirt's stop does
// (runStrategy Halted), with the stop recorded.
func TestIdleStop(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-stop")
	idleVM(t, ns, "ws", map[string]string{api.AnnotationIdleTimeout: "2s", api.AnnotationIdleGracePeriod: "3s"})

	eventually(t, 20*time.Second, func() error {
		if vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStopAt] == "" {
			return fmt.Errorf("no notice yet")
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopPending, "stops at")
	})
	noticed := time.Now()
	eventually(t, 20*time.Second, func() error {
		if vm := vmNow(t, ns, "ws"); !halted(vm) {
			return fmt.Errorf("runStrategy %v, want Halted", vm.Spec.RunStrategy)
		}
		return nil
	})
	if d := time.Since(noticed); d < 1500*time.Millisecond {
		t.Errorf("stopped %s after the notice; the grace period is 3s", d)
	}
	eventually(t, 10*time.Second, func() error {
		vm := vmNow(t, ns, "ws")
		rec := vm.Annotations[api.AnnotationIdleStop]
		if !strings.Contains(rec, `"action":"stopped"`) || !strings.Contains(rec, `"by":"`) {
			return fmt.Errorf("record %q", rec)
		}
		if vm.Annotations[api.AnnotationIdleStopAt] != "" {
			return fmt.Errorf("notice still on the stopped VM")
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopped, "no activity for 2s")
	})
	if n := len(stopsOf(kv, ns, "ws")); n != 1 {
		t.Errorf("%d stop calls, want 1", n)
	}
}

func stopsOf(kv *virthandler.Server, ns, name string) []virthandler.Call {
	var out []virthandler.Call
	for _, c := range kv.Accepted(virthandler.StopVM) {
		if c.Namespace == ns && c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// TestIdleActivityDuringGrace: input through the bridge during the grace
// period takes the notice back, and the VM keeps running.
func TestIdleActivityDuringGrace(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-grace")
	idleVM(t, ns, "ws", map[string]string{api.AnnotationIdleTimeout: "2s", api.AnnotationIdleGracePeriod: "4s"})
	eventually(t, 20*time.Second, func() error {
		if vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStopAt] == "" {
			return fmt.Errorf("no notice yet")
		}
		return nil
	})
	touch(t, ns, "ws", nil)
	eventually(t, 10*time.Second, func() error {
		if at := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStopAt]; at != "" {
			return fmt.Errorf("notice %s still there", at)
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopWithdrawn, "bridge vnc input")
	})
	// Keep typing for longer than the timeout and the grace together.
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		touch(t, ns, "ws", nil)
		if vm := vmNow(t, ns, "ws"); halted(vm) {
			t.Fatal("an active VM was stopped")
		}
	}
	if n := len(stopsOf(kv, ns, "ws")); n != 0 {
		t.Errorf("%d stop calls, want none", n)
	}
}

// TestIdleKeepRunningLease: a lease taken from the browser keeps an idle
// VM running, but only for max-keep-running; then notice and stop.
func TestIdleKeepRunningLease(t *testing.T) {
	subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-lease")
	start := time.Now()
	idleVM(t, ns, "ws", map[string]string{api.AnnotationIdleTimeout: "1s", api.AnnotationIdleGracePeriod: "1s", api.AnnotationMaxKeepRunning: "6s"})
	touch(t, ns, "ws", func(l *coordinationv1.Lease) {
		l.Annotations[api.AnnotationKeepRunningUntil] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		l.Annotations[api.AnnotationKeepRunningAt] = time.Now().UTC().Format(time.RFC3339)
		l.Annotations[api.AnnotationKeepRunningBy] = "alice"
	})
	var noticed time.Time
	eventually(t, 30*time.Second, func() error {
		if vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStopAt] == "" {
			return fmt.Errorf("no notice yet")
		}
		noticed = time.Now()
		return nil
	})
	if d := noticed.Sub(start); d < 4*time.Second {
		t.Errorf("notice %s after the lease was taken; the lease holds for max-keep-running, 6s", d)
	}
	eventually(t, 20*time.Second, func() error {
		if !halted(vmNow(t, ns, "ws")) {
			return fmt.Errorf("not stopped yet")
		}
		return nil
	})
}

// TestIdleObserveMode: a namespace in observe mode gets Events and a
// would-stop record, and nothing else: no notice, no stop.
func TestIdleObserveMode(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-observe")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: api.LifecycleConfigMap},
		Data: map[string]string{api.LifecycleKeyMode: api.ModeObserve, api.LifecycleKeyIdleTimeout: "2s", api.LifecycleKeyIdleGracePeriod: "2s"}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	idleVM(t, ns, "ws", nil)
	eventually(t, 30*time.Second, func() error {
		rec := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStop]
		if !strings.Contains(rec, `"action":"would-stop"`) {
			return fmt.Errorf("record %q", rec)
		}
		if err := idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopObserved, "would give notice"); err != nil {
			return err
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopObserved, "would stop")
	})
	vm := vmNow(t, ns, "ws")
	if halted(vm) || vm.Annotations[api.AnnotationIdleStopAt] != "" {
		t.Errorf("observe mode changed the VM: runStrategy %v, notice %q", *vm.Spec.RunStrategy, vm.Annotations[api.AnnotationIdleStopAt])
	}
	if n := len(stopsOf(kv, ns, "ws")); n != 0 {
		t.Errorf("%d stop calls in observe mode, want none", n)
	}
}

// TestIdleNeverLosesData: a VM with a writable containerDisk is given
// notice but never stopped; the skip is recorded with the reason.
func TestIdleNeverLosesData(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-unsafe")
	createRunning(t, newVM(ns, "ws", managed, withAnnotation(api.AnnotationIdleTimeout, "1s"), withAnnotation(api.AnnotationIdleGracePeriod, "1s")))
	eventually(t, 20*time.Second, func() error {
		rec := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStop]
		if !strings.Contains(rec, `"action":"skipped"`) || !strings.Contains(rec, "writable containerDisk") {
			return fmt.Errorf("record %q", rec)
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopSkipped, api.AnnotationIdleStopUnsafe)
	})
	time.Sleep(2 * time.Second)
	if vm := vmNow(t, ns, "ws"); halted(vm) {
		t.Error("a VM that would lose data was stopped")
	}
	if n := len(stopsOf(kv, ns, "ws")); n != 0 {
		t.Errorf("%d stop calls, want none", n)
	}
}

// TestIdleGuestUsers: users logged in to the guest (the guest agent's
// userlist) are activity: no notice while they are.
func TestIdleGuestUsers(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-guest")
	kv.SetUsers(ns, "ws", []kubevirtv1.VirtualMachineInstanceGuestOSUser{{UserName: "alice"}})
	idleVM(t, ns, "ws", map[string]string{api.AnnotationIdleTimeout: "1s", api.AnnotationIdleGracePeriod: "1s"})
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if vm := vmNow(t, ns, "ws"); vm.Annotations[api.AnnotationIdleStopAt] != "" || halted(vm) {
			t.Fatalf("a VM with a user logged in got notice or was stopped")
		}
	}
	kv.SetUsers(ns, "ws", nil)
	eventually(t, 20*time.Second, func() error {
		if !halted(vmNow(t, ns, "ws")) {
			return fmt.Errorf("not stopped after the user logged out")
		}
		return nil
	})
}

// tenantClient is a client of the API server as user, who may create,
// read and change VirtualMachines in ns (and nothing else), with its
// warnings recorded.
func tenantClient(t *testing.T, ns, user string) (client.Client, *testenv.WarningRecorder) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{kubevirtv1.GroupVersion.Group}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list", "create", "update", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-editor-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	w := &testenv.WarningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: env.Manager.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// TestIdleAnnotationsAreTheControllers: the lifecycle controller's
// annotations are written by its user alone. A tenant who writes them
// through the API server is warned, and the stored VM keeps the
// controller's values (or none); the controller's own writes (the webhook
// manager's user, here the administrator env.Client is) land.
func TestIdleAnnotationsAreTheControllers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t, "idle-guard")
	alice, warnings := tenantClient(t, ns, "alice")
	const record = `{"at":"2026-12-05T20:00:00Z","action":"stopped","reason":"no activity for 2h","by":"virtstation"}`

	// A VM copied from another cluster: its records go.
	vm := newVM(ns, "ws", managed, withAnnotation(api.AnnotationIdleStop, record), withAnnotation(api.AnnotationIdleStopAt, "2026-12-06T18:00:00Z"))
	if err := alice.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got := vmNow(t, ns, "ws").Annotations; got[api.AnnotationIdleStop] != "" || got[api.AnnotationIdleStopAt] != "" {
		t.Errorf("created with %v", got)
	}
	if err := containsAny(warnings.Take(), api.AnnotationIdleStopAt+" is written by the lifecycle controller"); err != nil {
		t.Error(err)
	}

	// The controller's record lands.
	annotate := func(c client.Client, k, v string) {
		t.Helper()
		vm := &kubevirtv1.VirtualMachine{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ws"}, vm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(vm.DeepCopy())
		vm.Annotations[k] = v
		if err := c.Patch(ctx, vm, patch); err != nil {
			t.Fatal(err)
		}
	}
	annotate(env.Client, api.AnnotationIdleStop, record)
	if got := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStop]; got != record {
		t.Fatalf("the controller's record is %q", got)
	}

	// The tenant's do not.
	annotate(alice, api.AnnotationIdleStop, `{"action":"skipped","reason":"fake"}`)
	if got := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStop]; got != record {
		t.Errorf("the tenant changed the record to %q", got)
	}
	if err := containsAny(warnings.Take(), api.AnnotationIdleStop+" is written by the lifecycle controller"); err != nil {
		t.Error(err)
	}
	annotate(alice, api.AnnotationIdleStopAt, time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
	if got := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStopAt]; got != "" {
		t.Errorf("the tenant set a notice %q", got)
	}
	if err := containsAny(warnings.Take(), api.AnnotationIdleStopAt+" is written by the lifecycle controller"); err != nil {
		t.Error(err)
	}
}
