package janitor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/janitor"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/sshbridge"
	"github.com/virtstation/virtstation/internal/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) { shared.Main(m) }

// TestSweep runs the janitor against a real API server with KubeVirt's
// CRDs, Leases written by a real session registry and pins by the real
// store: it deletes what belongs to a deleted VM or a long-gone replica and
// nothing else.
func TestSweep(t *testing.T) {
	cp := shared.Get(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crenvtest.InstallCRDs(cp.Config, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "internal", "testenv", "crds", "kubevirt.io_virtualmachines.yaml")},
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	vms, err := client.New(cp.Config, client.Options{Scheme: bridge.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"vs", "team"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	halted := kubevirtv1.RunStrategyHalted
	alive := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "alive"},
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}},
	}
	if err := vms.Create(ctx, alive); err != nil {
		t.Fatal(err)
	}

	rctx, stop := context.WithCancel(ctx)
	reg, err := session.New(kube, "vs", "replica-1", session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(rctx); err != nil {
		t.Fatal(err)
	}
	// Released: a Lease of the live VM and one of a deleted VM. Held: the
	// deleted VM's console, as if its session were still ending.
	for _, k := range []session.Key{{Namespace: "team", Name: "alive", Mode: "vnc"}, {Namespace: "team", Name: "gone", Mode: "vnc"}} {
		s, err := reg.Acquire(ctx, k, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Acquire(ctx, session.Key{Namespace: "team", Name: "gone", Mode: "console"}, "alice"); err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pins := sshbridge.NewConfigMapStore(kube, "vs")
	for _, vm := range []sshbridge.VMRef{{Namespace: "team", Name: "alive", UID: alive.UID}, {Namespace: "team", Name: "gone", UID: "uid-of-a-deleted-vm"}} {
		if err := pins.Pin(ctx, vm, key); err != nil {
			t.Fatal(err)
		}
	}
	// Activity Leases, written by a real Recorder, of the live VM and of
	// the deleted one.
	rec := activity.New(kube.CoordinationV1(), "vs", activity.Options{})
	for _, vm := range []string{"alive", "gone"} {
		if _, err := rec.KeepRunning(ctx, "team", vm, "alice", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	unrelated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "vs", Name: "someone-elses"}}
	if _, err := kube.CoreV1().ConfigMaps("vs").Create(ctx, unrelated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	j := &janitor.Janitor{Kube: kube, Namespace: "vs", VMs: vms, Log: logr.Discard()}
	res, err := j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (janitor.Result{Leases: 1, Pins: 1, Activity: 1}); res != want {
		t.Errorf("first sweep deleted %+v, want %+v: the released Lease, the activity Lease and the pin of the deleted VM", res, want)
	}
	wantLeases(t, kube, "vs-activity-", 1) // the live VM's
	wantLeases(t, kube, "vs-vnc-", 1)      // the live VM's
	wantLeases(t, kube, "vs-console-", 1)  // held, so kept
	wantLeases(t, kube, "vs-replica-", 1)  // fresh
	if _, ok, err := pins.Get(ctx, sshbridge.VMRef{Namespace: "team", Name: "alive", UID: alive.UID}); err != nil || !ok {
		t.Errorf("the live VM's pin: found %v, %v", ok, err)
	}

	// Two hours later, the replica gone: its heartbeat and the held Lease of
	// the deleted VM are garbage; the live VM's Lease and pin are not.
	stop()
	j.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err = j.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (janitor.Result{Leases: 1, Heartbeats: 1}); res != want {
		t.Errorf("second sweep deleted %+v, want %+v", res, want)
	}
	wantLeases(t, kube, "vs-vnc-", 1)
	wantLeases(t, kube, "vs-console-", 0)
	wantLeases(t, kube, "vs-replica-", 0)
	wantLeases(t, kube, "vs-activity-", 1)
	if _, err := kube.CoreV1().ConfigMaps("vs").Get(ctx, "someone-elses", metav1.GetOptions{}); err != nil {
		t.Errorf("a ConfigMap the bridge does not manage: %v", err)
	}
	cms, err := kube.CoreV1().ConfigMaps("vs").List(ctx, metav1.ListOptions{LabelSelector: sshbridge.PinSelector})
	if err != nil || len(cms.Items) != 1 {
		t.Errorf("pins left: %d (%v), want the live VM's", len(cms.Items), err)
	}
}

// wantLeases checks how many Leases in the bridge's namespace have the
// name prefix.
func wantLeases(t *testing.T, kube kubernetes.Interface, prefix string, n int) {
	t.Helper()
	list, err := kube.CoordinationV1().Leases("vs").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, l := range list.Items {
		if len(l.Name) >= len(prefix) && l.Name[:len(prefix)] == prefix {
			got++
		}
	}
	if got != n {
		t.Errorf("%d Leases named %s…, want %d", got, prefix, n)
	}
}
