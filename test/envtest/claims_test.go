package envtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks"
)

// releaseGrace is the Releaser's grace in these tests: short, so releases
// are quick to observe, and long enough to tell "kept" from "not yet seen".
const releaseGrace = time.Second

// claimResult is one racer's outcome.
type claimResult struct {
	disk string
	vm   string
	err  error
}

// raceClaims reads disks[i%len(disks)] and claims it writable for VM
// "vm-i", from n goroutines released at once.
func raceClaims(t *testing.T, ns string, disks []string, n int) []claimResult {
	t.Helper()
	ctx := context.Background()
	start := make(chan struct{})
	results := make([]claimResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := claimResult{disk: disks[i%len(disks)], vm: fmt.Sprintf("vm-%d", i)}
			<-start
			var pvc corev1.PersistentVolumeClaim
			if r.err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.disk}, &pvc); r.err == nil {
				r.err = claims.Claim(ctx, env.Client, &pvc, types.NamespacedName{Namespace: ns, Name: r.vm}, false, time.Now())
			}
			results[i] = r
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// checkOneWinnerPerDisk asserts each disk has exactly one winner, named by
// its claimed-by annotation, and that every loser lost the race cleanly.
func checkOneWinnerPerDisk(t *testing.T, ns string, disks []string, results []claimResult) {
	t.Helper()
	winners := map[string][]string{}
	conflicts, claimed := 0, 0
	for _, r := range results {
		switch {
		case r.err == nil:
			winners[r.disk] = append(winners[r.disk], r.vm)
		case errors.Is(r.err, claims.ErrConflict):
			conflicts++
		case errors.Is(r.err, claims.ErrClaimed):
			claimed++
		default:
			t.Errorf("%s on %s: %v, want nil, ErrConflict or ErrClaimed", r.vm, r.disk, r.err)
		}
	}
	t.Logf("%d racers, %d disks: %d lost on a conflict, %d read the winner's claim", len(results), len(disks), conflicts, claimed)
	for _, d := range disks {
		if len(winners[d]) != 1 {
			t.Errorf("disk %s: winners %q, want exactly one", d, winners[d])
			continue
		}
		var pvc corev1.PersistentVolumeClaim
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: d}, &pvc); err != nil {
			t.Fatal(err)
		}
		s := claims.Read(&pvc)
		if want := ns + "/" + winners[d][0]; s.ClaimedBy != want || len(s.SharedBy) != 0 || s.ClaimedAt.IsZero() {
			t.Errorf("disk %s: state %+v, want claimed by the winner %s with a claimed-at", d, s, want)
		}
	}
}

func TestClaimsRaceOneDisk(t *testing.T) {
	ns := newNamespace(t, "claim-race")
	for round := range 5 {
		disk := fmt.Sprintf("shared-%d", round)
		createPVC(t, ns, disk, true)
		results := raceClaims(t, ns, []string{disk}, 50)
		checkOneWinnerPerDisk(t, ns, []string{disk}, results)
	}
}

func TestClaimsRaceTenDisks(t *testing.T) {
	ns := newNamespace(t, "claim-race")
	disks := make([]string, 10)
	for i := range disks {
		disks[i] = fmt.Sprintf("disk-%d", i)
		createPVC(t, ns, disks[i], true)
	}
	results := raceClaims(t, ns, disks, 100)
	checkOneWinnerPerDisk(t, ns, disks, results)
}

// startReleaser runs a Releaser in a manager of its own for the duration of
// t, with the webhook binary's cache options (only labelled data disks are
// cached).
func startReleaser(t *testing.T, grace time.Duration) {
	t.Helper()
	skipNameValidation := true // webhooks.Setup may register the same controller
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 webhooks.NewScheme(),
		Cache:                  webhooks.CacheOptions(testenv.InstallNamespace),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Controller:             config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &claims.Releaser{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reader: mgr.GetCache(), Grace: grace}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("releaser manager: %v", err)
		}
	})
}

// claimDisk claims the disk (PVC or DataVolume) for vm, as of at.
func claimDisk(t *testing.T, obj client.Object, vm string, readOnly bool, at time.Time, opts ...claims.ClaimOption) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	if err := claims.Claim(ctx, env.Client, obj, types.NamespacedName{Namespace: obj.GetNamespace(), Name: vm}, readOnly, at, opts...); err != nil {
		t.Fatal(err)
	}
}

// claimState reads the disk's claims from the API server.
func claimState(t *testing.T, obj client.Object) claims.State {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return claims.Read(obj)
}

func pvcRef(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// withVolumes attaches the named PVCs and DataVolumes to an unmanaged VM
// (no webhook touches it) the way the mutating webhook would.
func withVolumes(pvcs, dvs []string) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		add := func(name string, src kubevirtv1.VolumeSource) {
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "vs-" + name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
			spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "vs-" + name, VolumeSource: src})
		}
		for _, p := range pvcs {
			add(p, kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: p},
			}})
		}
		for _, d := range dvs {
			add(d, kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: d}})
		}
	}
}

// newVMIUsing builds a VMI with a volume backed by the PVC.
func newVMIUsing(ns, name, pvc string) *kubevirtv1.VirtualMachineInstance {
	guest := resource.MustParse("1Gi")
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}, Devices: kubevirtv1.Devices{
				Disks: []kubevirtv1.Disk{{Name: "data", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
			}},
			Volumes: []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc},
			}}}},
		},
	}
}

// guardDelete asks the DeletionGuard about deleting obj, as the API server
// would: the object as stored travels as oldObject.
func guardDelete(t *testing.T, kind string, obj client.Object) admission.Response {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	g := &claims.DeletionGuard{Reader: env.Client, Grace: releaseGrace}
	return g.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: types.UID("delete-" + obj.GetName()), Operation: admissionv1.Delete, Kind: metav1.GroupVersionKind{Kind: kind},
		Namespace: obj.GetNamespace(), Name: obj.GetName(), OldObject: runtime.RawExtension{Raw: raw},
	}})
}

func wantDenied(t *testing.T, resp admission.Response, parts ...string) {
	t.Helper()
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 403 {
		t.Fatalf("deletion allowed (%+v), want a 403 denial", resp.Result)
	}
	for _, p := range parts {
		if !strings.Contains(resp.Result.Message, p) {
			t.Errorf("denial %q lacks %q", resp.Result.Message, p)
		}
	}
}

func wantAllowed(t *testing.T, resp admission.Response) {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("deletion denied: %s", resp.Result.Message)
	}
}

// TestClaimsRelease runs the Releaser against the API server:
//   - a claim by a VM that never appears goes after the grace period;
//   - a claim by a VM that attaches the disk stays until the VM is deleted;
//   - a claim by a VM whose record stops listing the disk goes;
//   - a VMI using the disk keeps even a stale claim until it is deleted.
//
// The DeletionGuard is asked along the way.
func TestClaimsRelease(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "claim-release")
	startReleaser(t, releaseGrace)

	for _, name := range []string{"orphan", "kept", "detached", "busy"} {
		createPVC(t, ns, name, true)
	}
	createDataVolume(t, ns, "home")
	orphan, kept, detached, busy := pvcRef(ns, "orphan"), pvcRef(ns, "kept"), pvcRef(ns, "detached"), pvcRef(ns, "busy")
	home := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}}

	keeper := newVM(ns, "keeper", withVolumes([]string{"kept"}, []string{"home"}))
	if err := env.Client.Create(ctx, keeper); err != nil {
		t.Fatal(err)
	}
	// "detacher" attaches its disk only through its injected record.
	detacher := newVM(ns, "detacher", withAnnotation(api.AnnotationInjected,
		`{"dataDisks":[{"name":"detached","kind":"PersistentVolumeClaim","disk":"vs-detached","serial":"detached","type":"disk","bus":"virtio"}]}`))
	if err := env.Client.Create(ctx, detacher); err != nil {
		t.Fatal(err)
	}
	runner := newVMIUsing(ns, "runner", "busy")
	if err := env.Client.Create(ctx, runner); err != nil {
		t.Fatal(err)
	}

	// claimed-at has whole seconds: start at the beginning of one, so a
	// claim written late in a second does not look a second older than it
	// is against the 1 s grace (the young-claim check below flaked so).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	now := time.Now()
	claimDisk(t, orphan, "never-created", false, now)
	claimDisk(t, kept, "keeper", false, now)
	claimDisk(t, home, "keeper", true, now)
	claimDisk(t, detached, "detacher", false, now)
	claimDisk(t, busy, "gone-long-ago", false, now.Add(-time.Hour))

	// While young, the orphan's claim blocks deletion: its VM may be on the way.
	wantDenied(t, guardDelete(t, "PersistentVolumeClaim", orphan), ns+"/never-created", "does not exist yet")

	eventually(t, syncTimeout, func() error {
		if s := claimState(t, orphan); !s.Empty() {
			return fmt.Errorf("orphan still claimed: %+v", s)
		}
		return nil
	})
	// claimed-at has whole seconds; the Releaser waits a grace from there.
	if age := time.Since(now.Truncate(time.Second)); age < releaseGrace {
		t.Errorf("orphan's claim released %s after it was written, before the grace of %s", age, releaseGrace)
	}
	wantAllowed(t, guardDelete(t, "PersistentVolumeClaim", orphan))

	// The Releaser has had two more graces to look at the others.
	time.Sleep(2 * releaseGrace)
	for _, tc := range []struct {
		disk client.Object
		want string
	}{{kept, ns + "/keeper"}, {detached, ns + "/detacher"}, {busy, ns + "/gone-long-ago"}} {
		if s := claimState(t, tc.disk); s.ClaimedBy != tc.want {
			t.Errorf("%s: claimed by %q, want it kept for %s", tc.disk.GetName(), s.ClaimedBy, tc.want)
		}
	}
	if s := claimState(t, home); len(s.SharedBy) != 1 || s.SharedBy[0] != ns+"/keeper" {
		t.Errorf("home: shared by %q, want it kept for %s/keeper", s.SharedBy, ns)
	}

	wantDenied(t, guardDelete(t, "PersistentVolumeClaim", kept), "PersistentVolumeClaim "+ns+"/kept is attached writable to VirtualMachine "+ns+"/keeper", "delete VirtualMachine "+ns+"/keeper")
	wantDenied(t, guardDelete(t, "DataVolume", home), "DataVolume "+ns+"/home is attached read-only to VirtualMachine "+ns+"/keeper")
	wantDenied(t, guardDelete(t, "PersistentVolumeClaim", busy), "in use by VirtualMachineInstance "+ns+"/runner")

	// Deleting the VM (it has no VMI) releases both its claims.
	if err := env.Client.Delete(ctx, keeper); err != nil {
		t.Fatal(err)
	}
	// Dropping the disk from the record releases the detacher's claim.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(detacher), detacher); err != nil {
		t.Fatal(err)
	}
	delete(detacher.Annotations, api.AnnotationInjected)
	if err := env.Client.Update(ctx, detacher); err != nil {
		t.Fatal(err)
	}
	// Deleting the VMI releases the stale claim it kept.
	if err := env.Client.Delete(ctx, runner); err != nil {
		t.Fatal(err)
	}
	for _, disk := range []client.Object{kept, home, detached, busy} {
		eventually(t, syncTimeout, func() error {
			if s := claimState(t, disk); !s.Empty() {
				return fmt.Errorf("%s still claimed: %+v", disk.GetName(), s)
			}
			return nil
		})
	}
	wantAllowed(t, guardDelete(t, "PersistentVolumeClaim", kept))
	wantAllowed(t, guardDelete(t, "DataVolume", home))
	wantAllowed(t, guardDelete(t, "PersistentVolumeClaim", busy))

	// A claim whose VM appears within the grace stays.
	claimDisk(t, orphan, "keeper-2", false, time.Now())
	if err := env.Client.Create(ctx, newVM(ns, "keeper-2", withVolumes([]string{"orphan"}, nil))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * releaseGrace)
	if s := claimState(t, orphan); s.ClaimedBy != ns+"/keeper-2" {
		t.Errorf("orphan: claimed by %q after its VM was created within the grace, want %s/keeper-2", s.ClaimedBy, ns)
	}
}
