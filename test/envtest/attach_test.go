package envtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// claimedDiskFixture creates a namespace with data disk "taken", claimed
// by the managed VM "owner" through its admission, and the free data disk
// "free".
func claimedDiskFixture(t *testing.T, prefix string) string {
	t.Helper()
	ns := newNamespace(t, prefix)
	createPVC(t, ns, "taken", true)
	createPVC(t, ns, "free", true)
	waitCached(t, pvcRef(ns, "taken"))
	waitCached(t, pvcRef(ns, "free"))
	owner := newVM(ns, "owner", managed, withAnnotation(api.AnnotationDataDisks, "taken:/data"))
	if err := env.Client.Create(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	if s := claimState(t, pvcRef(ns, "taken")); s.ClaimedBy != ns+"/owner" {
		t.Fatalf("taken: claimed by %q, want %s/owner", s.ClaimedBy, ns)
	}
	waitCached(t, owner)
	return ns
}

// wantDeniedErr wants err to be the API server's Forbidden carrying every
// part.
func wantDeniedErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: admitted, want a denial containing %q", what, parts)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: denial %q lacks %q", what, err, p)
		}
	}
}

// TestRemovingManagedLabelDoesNotSkipClaims: an update that removes
// virtstation.io/managed from a VM and adds a claimed data disk to its
// volumes in the same request is denied; removing the label alone passes.
func TestRemovingManagedLabelDoesNotSkipClaims(t *testing.T) {
	ctx := context.Background()
	ns := claimedDiskFixture(t, "unlabel")
	for name, addDisk := range map[string]bool{"label removed, claimed disk added": true, "label removed only": false} {
		t.Run(name, func(t *testing.T) {
			vm := newVM(ns, strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ",", ""), managed)
			if err := env.Client.Create(ctx, vm); err != nil {
				t.Fatal(err)
			}
			delete(vm.Labels, api.LabelManaged)
			if addDisk {
				attaching("pvc:taken")(vm)
			}
			err := env.Client.Update(ctx, vm)
			if !addDisk {
				if err != nil {
					t.Fatalf("removing the label alone: %v", err)
				}
				return
			}
			wantDeniedErr(t, "update", err, "persistentVolumeClaim.claimName", `data disk "taken"`, ns+"/owner", "rule: disk-claim", "fix:")
			taken := pvcRef(ns, "taken")
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(taken), taken); err != nil {
				t.Fatal(err)
			}
			if s := claims.Read(taken); s.ClaimedBy != ns+"/owner" || len(s.SharedBy) != 0 {
				t.Errorf("taken: %+v, want claimed by %s/owner alone", s, ns)
			}
		})
	}
}

// TestDirectVMICannotAttachClaimedDisk: a VirtualMachineInstance created
// directly (no VM) with a claimed data disk is denied, naming the field,
// the rule and the fix; one with a free data disk is admitted.
func TestDirectVMICannotAttachClaimedDisk(t *testing.T) {
	ctx := context.Background()
	ns := claimedDiskFixture(t, "vmi")
	err := env.Client.Create(ctx, newVMIUsing(ns, "rogue", "taken"))
	wantDeniedErr(t, "VMI create", err, "spec.volumes[0].persistentVolumeClaim.claimName", `data disk "taken"`, "VM "+ns+"/owner", "rule: disk-claim", `fix: remove volume "data"`)
	if err := env.Client.Create(ctx, newVMIUsing(ns, "honest", "free")); err != nil {
		t.Fatalf("VMI with a free data disk: %v", err)
	}
}

// hotplugVolumeRequest is the request virt-api's virtualmachines/addvolume
// appends to status.volumeRequests (KubeVirt v1.9,
// pkg/virt-api/rest/volumes.go: addVolumeRequestHandler).
func hotplugVolumeRequest(volume, pvc string) kubevirtv1.VirtualMachineVolumeRequest {
	return kubevirtv1.VirtualMachineVolumeRequest{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{
		Name: volume,
		Disk: &kubevirtv1.Disk{Name: volume, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}, Hotpluggable: true,
		}},
	}}
}

// addVolumeRequest patches the VM's status as virt-api does for
// `virtctl addvolume --persist` with the HotplugVolumes feature gate: a
// JSON patch through the status subresource that tests the current
// requests and adds or replaces them.
func addVolumeRequest(ctx context.Context, t *testing.T, vm *kubevirtv1.VirtualMachine, r kubevirtv1.VirtualMachineVolumeRequest) error {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	requests := append(append([]kubevirtv1.VirtualMachineVolumeRequest{}, vm.Status.VolumeRequests...), r)
	op := "add"
	if len(vm.Status.VolumeRequests) > 0 {
		op = "replace"
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/status/volumeRequests", "value": vm.Status.VolumeRequests},
		{"op": op, "path": "/status/volumeRequests", "value": requests},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vm.Status.VolumeRequests) == 0 {
		// virt-api tests a nil list as null, which only matches an
		// absent field; the status of a new VM has none.
		patch, err = json.Marshal([]map[string]any{{"op": "add", "path": "/status/volumeRequests", "value": requests}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return env.Client.Status().Patch(ctx, vm, client.RawPatch(types.JSONPatchType, patch))
}

// TestHotplugCannotAttachClaimedDisk: hot-plugging a claimed data disk is
// denied on both paths virt-api writes: a VM status update adding a
// volumeRequest (managed and unmanaged VMs alike), and a VMI spec update
// adding the volume. Hot-plugging a free disk passes, and a status write
// that adds no volume request is never sent to the webhook.
func TestHotplugCannotAttachClaimedDisk(t *testing.T) {
	ctx := context.Background()
	ns := claimedDiskFixture(t, "hotplug")
	for name, opts := range map[string][]vmOption{"managed": {managed}, "unmanaged": nil} {
		t.Run("vm status of "+name, func(t *testing.T) {
			vm := newVM(ns, "hp-"+name, opts...)
			if err := env.Client.Create(ctx, vm); err != nil {
				t.Fatal(err)
			}
			before := webhookRequests(t, validate.VMStatusPath)
			vm.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusStopped
			if err := env.Client.Status().Update(ctx, vm); err != nil {
				t.Fatalf("KubeVirt-like status write: %v", err)
			}
			if after := webhookRequests(t, validate.VMStatusPath); after != before {
				t.Errorf("a status write adding no volume request reached the webhook (%v -> %v requests)", before, after)
			}
			err := addVolumeRequest(ctx, t, vm, hotplugVolumeRequest("hp", "taken"))
			wantDeniedErr(t, "addvolume of a claimed disk", err,
				"status.volumeRequests[0].addVolumeOptions.volumeSource.persistentVolumeClaim.claimName", `data disk "taken"`, "VM "+ns+"/owner", "rule: disk-claim", "fix:")
			if err := addVolumeRequest(ctx, t, vm, hotplugVolumeRequest("hp-free", "free")); err != nil {
				t.Fatalf("addvolume of a free data disk: %v", err)
			}
		})
	}
	t.Run("vmi spec", func(t *testing.T) {
		vmi := newVMIUsing(ns, "runner", "free")
		if err := env.Client.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		// virt-api's vmiVolumePatch: the VMI's volumes and disks replaced
		// with the hot-plugged one appended.
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{Name: "hp", VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "taken"}, Hotpluggable: true,
			}}})
		vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "hp", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}})
		patch, err := json.Marshal([]map[string]any{
			{"op": "replace", "path": "/spec/volumes", "value": vmi.Spec.Volumes},
			{"op": "replace", "path": "/spec/domain/devices/disks", "value": vmi.Spec.Domain.Devices.Disks},
		})
		if err != nil {
			t.Fatal(err)
		}
		err = env.Client.Patch(ctx, vmi, client.RawPatch(types.JSONPatchType, patch))
		wantDeniedErr(t, "VMI hot-plug of a claimed disk", err, "spec.volumes[1].persistentVolumeClaim.claimName", `data disk "taken"`, "rule: disk-claim", `fix: remove volume "hp"`)
	})
}
