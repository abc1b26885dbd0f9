package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// attaching gives the VM a disk and volume "user-<name>" per entry, backed
// by a PVC (pvc:<name>) or a DataVolume (dv:<name>), named in the volumes
// only (names the mutating webhook does not own).
func attaching(refs ...string) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		for _, ref := range refs {
			kind, name, _ := strings.Cut(ref, ":")
			vol := kubevirtv1.Volume{Name: "user-" + name}
			switch kind {
			case "pvc":
				vol.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
				}
			case "dv":
				vol.DataVolume = &kubevirtv1.DataVolumeSource{Name: name}
			default:
				panic("attaching: " + ref)
			}
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: vol.Name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
			spec.Volumes = append(spec.Volumes, vol)
		}
	}
}

// wantCreateDenied creates vm and wants a denial containing every part.
func wantCreateDenied(t *testing.T, vm *kubevirtv1.VirtualMachine, parts ...string) {
	t.Helper()
	err := env.Client.Create(context.Background(), vm)
	if err == nil {
		t.Fatalf("VM %s admitted, want a denial containing %q", vm.Name, parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("VM %s: denial %q lacks %q", vm.Name, err, p)
		}
	}
}

func dvClaim(t *testing.T, ns, name string) claims.State {
	t.Helper()
	var dv cdiv1beta1.DataVolume
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &dv); err != nil {
		t.Fatal(err)
	}
	return claims.Read(&dv)
}

// TestDirectVolumeCannotBypassClaim: a managed VM that names a claimed
// data disk in spec.template.spec.volumes, with no data-disks annotation,
// is denied naming that field; naming a free data disk there claims it, so
// an annotated VM is then denied; a PVC that is not a data disk is left
// alone.
func TestDirectVolumeCannotBypassClaim(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "direct")
	createDataVolume(t, ns, "home")
	createPVC(t, ns, "scratch", true)
	createPVC(t, ns, "root", false)
	waitCached(t, &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}})
	waitCached(t, pvcRef(ns, "scratch"))

	owner := newVM(ns, "owner", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"))
	if err := env.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if got := dvClaim(t, ns, "home").ClaimedBy; got != ns+"/owner" {
		t.Fatalf("home claimed by %q, want %s/owner", got, ns)
	}
	waitCached(t, owner)

	// The container disk is volumes[0]; the direct one volumes[1].
	wantCreateDenied(t, newVM(ns, "thief", managed, attaching("dv:home")),
		`spec.template.spec.volumes[1].dataVolume.name: Forbidden: data disk "home" is attached writable to VM `+ns+`/owner`,
		`(rule: disk-claim; fix: remove volume "user-home" from this VM`)
	wantCreateDenied(t, newVM(ns, "pvc-thief", managed, attaching("pvc:root", "pvc:home")),
		"spec.template.spec.volumes[2].persistentVolumeClaim.claimName", "rule: disk-claim", ns+"/owner")

	direct := newVM(ns, "direct", managed, attaching("pvc:root", "pvc:scratch"))
	if err := env.Client.Create(ctx, direct); err != nil {
		t.Fatalf("managed VM naming a free data disk and a plain PVC in its volumes: %v", err)
	}
	if got := claimOf(ctx, t, ns, "scratch").ClaimedBy; got != ns+"/direct" {
		t.Errorf("scratch claimed by %q, want %s/direct (a disk named in the volumes is claimed)", got, ns)
	}
	if s := claimOf(ctx, t, ns, "root"); !s.Empty() {
		t.Errorf("root (not a data disk) got claims %+v, want none", s)
	}
	waitCached(t, direct)
	wantCreateDenied(t, newVM(ns, "annotated", managed, withAnnotation(api.AnnotationDataDisks, "scratch:/data")),
		"metadata.annotations[virtstation.io/data-disks][0].name", ns+"/direct")
}

// TestUnmanagedVMCannotAttachClaimedDisk: a VM without the managed label
// that attaches a data disk another VM holds is denied (by the fail-open
// webhook for unmanaged VMs); one that attaches a free data disk or a plain
// PVC is admitted and claims nothing; its updates that leave the volumes
// alone always pass.
func TestUnmanagedVMCannotAttachClaimedDisk(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "unmanaged")
	createDataVolume(t, ns, "home")
	createPVC(t, ns, "free", true)
	createPVC(t, ns, "later", true)
	createPVC(t, ns, "plain", false)
	waitCached(t, &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}})
	waitCached(t, pvcRef(ns, "later"))

	owner := newVM(ns, "owner", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"))
	if err := env.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitCached(t, owner)

	wantCreateDenied(t, newVM(ns, "plain-dv", attaching("dv:home")),
		`spec.template.spec.volumes[1].dataVolume.name: Forbidden: data disk "home" is attached writable to VM `+ns+`/owner, which Virtstation manages`,
		"rule: disk-claim", `fix: remove volume "user-home" from this VM`)
	wantCreateDenied(t, newVM(ns, "plain-pvc", attaching("pvc:plain", "pvc:home")),
		"spec.template.spec.volumes[2].persistentVolumeClaim.claimName", ns+"/owner")

	free := newVM(ns, "free-user", attaching("pvc:free", "pvc:plain"))
	if err := env.Client.Create(ctx, free); err != nil {
		t.Fatalf("unmanaged VM attaching a free data disk and a plain PVC: %v", err)
	}
	for _, d := range []string{"free", "plain"} {
		if s := claimOf(ctx, t, ns, d); !s.Empty() {
			t.Errorf("%s got claims %+v from an unmanaged VM, want none (it only denies)", d, s)
		}
	}

	// The trade-off: an unmanaged VM claims nothing, so a managed VM can
	// claim a disk it has. The unmanaged VM's updates that do not touch
	// its volumes still pass (KubeVirt's own writes are such updates);
	// adding the now-claimed disk does not.
	holder := newVM(ns, "holder", attaching("pvc:later"))
	if err := env.Client.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	taker := newVM(ns, "taker", managed, withAnnotation(api.AnnotationDataDisks, "later:/data"))
	if err := env.Client.Create(ctx, taker); err != nil {
		t.Fatalf("managed VM claiming a disk only an unmanaged, stopped VM names: %v", err)
	}
	waitCached(t, taker)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(holder), holder); err != nil {
		t.Fatal(err)
	}
	holder.Annotations = map[string]string{"example.com/touched": "yes"}
	holder.Finalizers = append(holder.Finalizers, "example.com/keep")
	if err := env.Client.Update(ctx, holder); err != nil {
		t.Fatalf("update of an unmanaged VM that leaves its volumes alone: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(free), free); err != nil {
		t.Fatal(err)
	}
	attaching("pvc:later")(free)
	err := env.Client.Update(ctx, free)
	if err == nil || !strings.Contains(err.Error(), "spec.template.spec.volumes[3].persistentVolumeClaim.claimName") || !strings.Contains(err.Error(), ns+"/taker") {
		t.Errorf("update adding a claimed disk to an unmanaged VM: err = %v, want a denial naming the volume and %s/taker", err, ns)
	}
	holder.Finalizers = nil
	if err := env.Client.Update(ctx, holder); err != nil {
		t.Fatalf("dropping the finalizer of an unmanaged VM: %v", err)
	}
}

// TestClaimVerdictsAgree: the managed VM webhook, the unmanaged VM
// webhook, the deletion guard, the Releaser and `virtstation render` judge
// the same claims alike (claims.Live): a claim whose VM does not exist yet
// but which is within its grace period holds everywhere, and so does a
// claim whose VM attaches the disk.
func TestClaimVerdictsAgree(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "agree")
	createPVC(t, ns, "pending", true)
	createPVC(t, ns, "attached", true)
	keeper := newVM(ns, "keeper", attaching("pvc:attached"))
	if err := env.Client.Create(ctx, keeper); err != nil {
		t.Fatal(err)
	}
	// claimed-at a minute ahead (a skewed clock) keeps the pending claim
	// within its grace for the whole test: Live counts it for one grace
	// from now, however far ahead it is.
	claimDisk(t, pvcRef(ns, "pending"), "not-created-yet", false, time.Now().Add(time.Minute))
	claimDisk(t, pvcRef(ns, "attached"), "keeper", false, time.Now().Add(-time.Hour))
	waitCached(t, keeper)
	for _, d := range []string{"pending", "attached"} {
		eventually(t, 10*time.Second, func() error {
			var pvc corev1.PersistentVolumeClaim
			if err := env.Manager.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: d}, &pvc); err != nil {
				return err
			}
			if claims.Read(&pvc).Empty() {
				return fmt.Errorf("the cache has not seen %s's claim yet", d)
			}
			return nil
		})
	}

	engine := validate.NewEngine(time.Second)
	if _, err := engine.Load(ctx, validate.ShippedModules()); err != nil {
		t.Fatal(err)
	}
	cluster := clusterObjects(t, ns)
	for _, tc := range []struct{ disk, holder string }{
		{"pending", ns + "/not-created-yet"},
		{"attached", ns + "/keeper"},
	} {
		t.Run(tc.disk, func(t *testing.T) {
			managedVM := newVM(ns, "wants-"+tc.disk, managed, withAnnotation(api.AnnotationDataDisks, tc.disk+":/data"))
			unmanagedVM := newVM(ns, "plain-wants-"+tc.disk, attaching("pvc:"+tc.disk))

			webhook := env.Client.Create(ctx, managedVM.DeepCopy(), client.DryRunAll)
			unmanaged := env.Client.Create(ctx, unmanagedVM.DeepCopy(), client.DryRunAll)
			guard := env.Client.Delete(ctx, pvcRef(ns, tc.disk), client.DryRunAll)
			verdicts, err := render.Render(ctx, render.Options{
				Manifests: []render.Object{toObject(t, managedVM), toObject(t, unmanagedVM)},
				Cluster:   cluster, Namespace: ns, Policies: engine, Grace: testenv.ClaimGrace,
			})
			if err != nil {
				t.Fatal(err)
			}
			for name, err := range map[string]error{
				"managed VM webhook":   webhook,
				"unmanaged VM webhook": unmanaged,
				"deletion guard":       guard,
				"render, managed VM":   verdicts[0].Denied.ToAggregate(),
				"render, unmanaged VM": verdicts[1].Denied.ToAggregate(),
			} {
				if err == nil || !strings.Contains(err.Error(), tc.holder) {
					t.Errorf("%s: %v, want a denial naming %s (the claim holds)", name, err, tc.holder)
				}
			}
			// The Releaser has had two graces to judge the claim.
			time.Sleep(2 * testenv.ClaimGrace)
			if got := claimOf(ctx, t, ns, tc.disk).ClaimedBy; got != tc.holder {
				t.Errorf("Releaser: %s claimed by %q, want it kept for %s", tc.disk, got, tc.holder)
			}
		})
	}
}

// clusterObjects reads the namespace's PVCs and VMs as `virtstation render
// --objects` takes them.
func clusterObjects(t *testing.T, ns string) []render.Object {
	t.Helper()
	ctx := context.Background()
	var out []render.Object
	var pvcs corev1.PersistentVolumeClaimList
	if err := env.Client.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range pvcs.Items {
		pvcs.Items[i].APIVersion, pvcs.Items[i].Kind = "v1", "PersistentVolumeClaim"
		out = append(out, toObject(t, &pvcs.Items[i]))
	}
	var vms kubevirtv1.VirtualMachineList
	if err := env.Client.List(ctx, &vms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range vms.Items {
		out = append(out, toObject(t, &vms.Items[i]))
	}
	return out
}

// toObject converts a typed object to render's generic form.
func toObject(t *testing.T, obj runtime.Object) render.Object {
	t.Helper()
	if vm, ok := obj.(*kubevirtv1.VirtualMachine); ok {
		vm.APIVersion, vm.Kind = kubevirtv1.SchemeGroupVersion.String(), "VirtualMachine"
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
