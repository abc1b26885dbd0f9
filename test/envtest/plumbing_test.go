package envtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
)

// strict makes the API server reject unknown or duplicate fields, so a
// mutation that wrote a field the real KubeVirt schema lacks fails here.
var strict = client.FieldValidation("Strict")

func createDataVolume(t *testing.T, ns, name string) {
	t.Helper()
	dv := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{api.LabelDataDisk: api.LabelTrue}},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source: &cdiv1beta1.DataVolumeSource{Blank: &cdiv1beta1.DataVolumeBlankImage{}},
			Storage: &cdiv1beta1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			}},
		},
	}
	if err := env.Client.Create(context.Background(), dv); err != nil {
		t.Fatal(err)
	}
}

func createPVC(t *testing.T, ns, name string, labelled bool) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if labelled {
		pvc.Labels = map[string]string{api.LabelDataDisk: api.LabelTrue}
	}
	if err := env.Client.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// waitCached waits until the webhook's informers hold obj.
func waitCached(t *testing.T, obj client.Object) {
	t.Helper()
	eventually(t, 10e9, func() error {
		return env.Manager.GetCache().Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	})
}

func injectedOf(t *testing.T, vm *kubevirtv1.VirtualMachine) api.Injected {
	t.Helper()
	rec, err := api.ParseInjected(vm.Annotations[api.AnnotationInjected])
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func findDisk(vm *kubevirtv1.VirtualMachine, name string) *kubevirtv1.Disk {
	for i, d := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		if d.Name == name {
			return &vm.Spec.Template.Spec.Domain.Devices.Disks[i]
		}
	}
	return nil
}

func findVolume(vm *kubevirtv1.VirtualMachine, name string) *kubevirtv1.Volume {
	for i, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &vm.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// reconcileTimeout bounds how long a test waits for a reconciler to write
// a VM's Secrets after the VM is stored, with slack for a loaded machine.
const reconcileTimeout = 15 * time.Second

// userDataOf returns the merged user-data the VM's cloud-init volume points
// at: inline, or in the Secret the user-data reconciler writes once the VM
// is stored.
func userDataOf(t *testing.T, vm *kubevirtv1.VirtualMachine) []byte {
	t.Helper()
	for _, v := range vm.Spec.Template.Spec.Volumes {
		src := v.CloudInitNoCloud
		if src == nil {
			continue
		}
		if src.UserDataSecretRef != nil {
			var s corev1.Secret
			key := client.ObjectKey{Namespace: vm.Namespace, Name: src.UserDataSecretRef.Name}
			eventually(t, reconcileTimeout, func() error { return env.Client.Get(context.Background(), key, &s) })
			return s.Data["userdata"]
		}
		return []byte(src.UserData)
	}
	t.Fatal("no cloud-init volume")
	return nil
}

func TestDataDisksAttachAndMount(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "disks")
	createDataVolume(t, ns, "home")
	createPVC(t, ns, "scratch", true)
	createPVC(t, ns, "iso", true)
	createPVC(t, ns, "unlabelled", false)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iso"}})
	waitCached(t, &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}})

	const userData = "#cloud-config\npackages: [git]\n"
	manifest := newVM(ns, "ws", managed,
		withAnnotation(api.AnnotationDataDisks, `[{"name":"home","mountPath":"/home/dev"},{"name":"scratch","mountPath":"/scratch"},{"name":"iso","type":"cdrom"}]`),
		withAnnotation(api.AnnotationSSHUser, "dev"),
		func(vm *kubevirtv1.VirtualMachine) {
			spec := &vm.Spec.Template.Spec
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "cloudinit", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
			spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{
				CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData},
			}})
		})
	vm := manifest.DeepCopy()
	if err := env.Client.Create(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}

	home, scratch, iso := findDisk(vm, "vs-home"), findDisk(vm, "vs-scratch"), findDisk(vm, "vs-iso")
	if home == nil || home.Disk == nil || home.Disk.Bus != "virtio" || home.Serial != "home" {
		t.Fatalf("home disk = %+v, want virtio with serial home", home)
	}
	if scratch == nil || scratch.Serial != "scratch" {
		t.Fatalf("scratch disk = %+v", scratch)
	}
	if iso == nil || iso.CDRom == nil || iso.CDRom.Bus != "sata" || iso.CDRom.ReadOnly == nil || !*iso.CDRom.ReadOnly {
		t.Fatalf("iso disk = %+v, want a read-only sata cdrom", iso)
	}
	if v := findVolume(vm, "vs-home"); v == nil || v.DataVolume == nil || v.DataVolume.Name != "home" {
		t.Fatalf("home volume = %+v, want dataVolume home", v)
	}
	if v := findVolume(vm, "vs-scratch"); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "scratch" {
		t.Fatalf("scratch volume = %+v, want persistentVolumeClaim scratch", v)
	}

	merged := userDataOf(t, vm)
	user, ours, err := cloudinit.Split(merged)
	if err != nil || !ours || string(user) != userData {
		t.Fatalf("user's part = %q (ours=%v, %v), want %q byte for byte", user, ours, err, userData)
	}
	for _, want := range []string{"mount_disk 'home' '/home/dev' 'dev'", "mount_disk 'scratch' '/scratch' 'dev'"} {
		if !strings.Contains(string(merged), want) {
			t.Errorf("merged user-data lacks %q", want)
		}
	}
	if strings.Contains(string(merged), "'iso'") {
		t.Error("the cdrom must not be mounted")
	}

	// Applying the same manifest again leaves the spec and the user-data unchanged.
	again := manifest.DeepCopy()
	again.ResourceVersion = vm.ResourceVersion
	if err := env.Client.Update(ctx, again, strict); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Spec, vm.Spec) {
		a, _ := json.Marshal(again.Spec)
		b, _ := json.Marshal(vm.Spec)
		t.Fatalf("second apply changed the spec:\nfirst:  %s\nsecond: %s", b, a)
	}
	if got := userDataOf(t, again); string(got) != string(merged) {
		t.Fatal("second apply changed the merged user-data")
	}

	// An unlabelled PVC is not a data disk.
	bad := newVM(ns, "ws-bad", managed, withAnnotation(api.AnnotationDataDisks, "unlabelled:/data"))
	err = env.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), `metadata.annotations[virtstation.io/data-disks][0].name`) || !strings.Contains(err.Error(), "label it virtstation.io/data-disk=true") {
		t.Fatalf("unlabelled PVC: err = %v, want a denial naming the field and the fix", err)
	}
}

func TestDataDisksChangeOnlyWhileStopped(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "disks")
	createPVC(t, ns, "a", true)
	createPVC(t, ns, "b", true)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}})
	vm := newVM(ns, "ws", managed, withAnnotation(api.AnnotationDataDisks, "a:/a"))
	if err := env.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	// The VM is halted and has no VMI: changing the disks is fine.
	vm.Annotations[api.AnnotationDataDisks] = "a:/a,b:/b"
	if err := env.Client.Update(ctx, vm); err != nil {
		t.Fatalf("stopped VM: %v", err)
	}
	// With a VMI (the VM is running), a change is denied and nothing is lost.
	guest := resource.MustParse("1Gi")
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ws"},
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}}},
	}
	if err := env.Client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	waitCached(t, vmi)
	vm.Annotations[api.AnnotationDataDisks] = "a:/a"
	err := env.Client.Update(ctx, vm)
	if err == nil || !strings.Contains(err.Error(), "only while the VM is stopped and its VMI is gone") {
		t.Fatalf("running VM: err = %v, want a denial saying the VM must be stopped", err)
	}
	var stored kubevirtv1.VirtualMachine
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &stored); err != nil {
		t.Fatal(err)
	}
	if findDisk(&stored, "vs-b") == nil {
		t.Fatal("denied update still detached disk b")
	}
	// Other updates of the running VM go through.
	stored.Labels["team"] = "x"
	if err := env.Client.Update(ctx, &stored); err != nil {
		t.Fatalf("unrelated update of a running VM: %v", err)
	}
}

func TestGPUsVideoAndTablet(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "gpu")
	vm := newVM(ns, "ml", managed,
		withAnnotation(api.AnnotationGPUs, "nvidia.com/GH100_H200=2"),
		withAnnotation(api.AnnotationVideo, "virtio"),
		func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		})
	if err := env.Client.Create(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}
	devs := vm.Spec.Template.Spec.Domain.Devices
	var got []string
	for _, g := range devs.GPUs {
		got = append(got, g.Name+"="+g.DeviceName)
	}
	want := []string{"gpu0=nvidia.com/gpu", "gpu1=nvidia.com/GH100_H200", "gpu2=nvidia.com/GH100_H200"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gpus = %v, want %v", got, want)
	}
	if _, ok := vm.Spec.Template.Spec.Domain.Resources.Limits["nvidia.com/gpu"]; ok {
		t.Fatal("nvidia.com/gpu is still in resources.limits: the device would be requested twice")
	}
	if devs.Video == nil || devs.Video.Type != "virtio" {
		t.Fatalf("video = %+v, want virtio", devs.Video)
	}
	if len(devs.Inputs) != 1 || devs.Inputs[0].Type != "tablet" || devs.Inputs[0].Bus != "usb" {
		t.Fatalf("inputs = %+v, want one USB tablet", devs.Inputs)
	}

	// Fewer GPUs in the annotation removes the webhook's own entries only.
	vm.Annotations[api.AnnotationGPUs] = "nvidia.com/GH100_H200=1"
	if err := env.Client.Update(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}
	if n := len(vm.Spec.Template.Spec.Domain.Devices.GPUs); n != 2 {
		t.Fatalf("after lowering the count: %d gpus, want 2 (the moved one and one H200)", n)
	}

	for name, tc := range map[string]struct {
		video   string
		noGraph bool
		want    string
	}{
		"unknown type":        {video: "qxl", want: `supported values: "bochs", "cirrus", "ramfb", "vga", "virtio"`},
		"graphics turned off": {video: "vga", noGraph: true, want: "autoattachGraphicsDevice is false"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := newVM(ns, "video-"+strings.ReplaceAll(name, " ", "-"), managed, withAnnotation(api.AnnotationVideo, tc.video), func(vm *kubevirtv1.VirtualMachine) {
				if tc.noGraph {
					f := false
					vm.Spec.Template.Spec.Domain.Devices.AutoattachGraphicsDevice = &f
				}
			})
			err := env.Client.Create(ctx, bad)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "metadata.annotations[virtstation.io/video]") {
				t.Fatalf("err = %v, want a denial containing %q", err, tc.want)
			}
		})
	}
}

func TestSSHKeysSecretBeforeFirstStart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "ssh")
	vm := newVM(ns, "dev", managed, withAnnotation(api.AnnotationSSHUser, "alice"))

	// A dry run creates no Secret.
	if err := env.Client.Create(ctx, vm.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-ssh-keys"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("after a dry run, get dev-ssh-keys = %v, want NotFound", err)
	}

	if err := env.Client.Create(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}
	creds := vm.Spec.Template.Spec.AccessCredentials
	if len(creds) != 1 || creds[0].SSHPublicKey == nil ||
		creds[0].SSHPublicKey.Source.Secret == nil || creds[0].SSHPublicKey.Source.Secret.SecretName != "dev-ssh-keys" ||
		creds[0].SSHPublicKey.PropagationMethod.QemuGuestAgent == nil ||
		!reflect.DeepEqual(creds[0].SSHPublicKey.PropagationMethod.QemuGuestAgent.Users, []string{"alice"}) {
		b, _ := json.Marshal(creds)
		t.Fatalf("accessCredentials = %s", b)
	}
	// The reconciler writes the Secret once the VM is stored, even with
	// no keys yet; the first start (the launcher pod's Secret volume)
	// waits for it.
	var s corev1.Secret
	eventually(t, reconcileTimeout, func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-ssh-keys"}, &s)
	})
	if rec := injectedOf(t, vm); rec.SSHKeys == nil || rec.SSHKeys.Secret != "dev-ssh-keys" {
		t.Fatalf("injected sshKeys = %+v", rec.SSHKeys)
	}
}

func TestSSHKeysThroughCloudInit(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "ssh")
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM+A+BzAeVbKARZ/Hth8zd13lHA/GpufS18bOYtokQH7 alice@example"
	keys := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys", Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		StringData: map[string]string{"authorized_keys": key + "\nnot a key\n"},
	}
	if err := env.Client.Create(ctx, keys); err != nil {
		t.Fatal(err)
	}
	waitCached(t, keys)
	vm := newVM(ns, "dev", managed, withAnnotation(api.AnnotationSSHUser, "alice"), withAnnotation(api.AnnotationSSHPropagation, api.PropagationCloudInit))
	if err := env.Client.Create(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}
	if n := len(vm.Spec.Template.Spec.AccessCredentials); n != 0 {
		t.Fatalf("cloudInit propagation wrote %d accessCredentials", n)
	}
	data := userDataOf(t, vm)
	var part struct {
		Users []json.RawMessage `json:"users"`
	}
	if err := yaml.Unmarshal(data, &part); err != nil {
		t.Fatalf("user-data is not YAML: %v\n%s", err, data)
	}
	var alice struct {
		Name string   `json:"name"`
		Keys []string `json:"ssh_authorized_keys"`
	}
	if len(part.Users) != 2 || json.Unmarshal(part.Users[1], &alice) != nil || alice.Name != "alice" || !reflect.DeepEqual(alice.Keys, []string{key}) {
		t.Fatalf("user-data does not give alice exactly the valid key:\n%s", data)
	}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-ssh-keys"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("cloudInit propagation created dev-ssh-keys (%v)", err)
	}
}

// TestUserDataFromSecretIsMerged: user-data in the user's own Secret is
// merged into a per-VM Secret (only on real admissions) and kept byte for
// byte; the user's Secret is left untouched.
func TestUserDataFromSecretIsMerged(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "userdata")
	createPVC(t, ns, "data", true)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})
	userData := "#!/bin/sh\r\necho 'hello from the user'\r\n" // CRLF, no cloud-config: must survive as is
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-userdata"}, Data: map[string][]byte{"userdata": []byte(userData)}}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	manifest := newVM(ns, "dev", managed, withAnnotation(api.AnnotationDataDisks, "data:/data"), func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "my-userdata"}},
		}})
		vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "ci"})
	})

	if err := env.Client.Create(ctx, manifest.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-userdata"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry run: get dev-userdata = %v, want NotFound", err)
	}

	vm := manifest.DeepCopy()
	if err := env.Client.Create(ctx, vm, strict); err != nil {
		t.Fatal(err)
	}
	ref := findVolume(vm, "ci").CloudInitNoCloud.UserDataSecretRef
	if ref == nil || ref.Name != "dev-userdata" {
		t.Fatalf("secretRef = %+v, want dev-userdata", ref)
	}
	user, ours, err := cloudinit.Split(userDataOf(t, vm))
	if err != nil || !ours || string(user) != userData {
		t.Fatalf("user's part = %q (ours=%v, %v), want %q", user, ours, err, userData)
	}
	var after corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), &after); err != nil || string(after.Data["userdata"]) != userData {
		t.Fatalf("the user's Secret changed: %v %q", err, after.Data["userdata"])
	}
	// Re-applying the manifest (which still names the user's Secret) is stable.
	again := manifest.DeepCopy()
	again.ResourceVersion = vm.ResourceVersion
	if err := env.Client.Update(ctx, again, strict); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Spec, vm.Spec) {
		t.Fatal("re-applying changed the spec")
	}
	// The per-VM Secret is owned by the VM once it exists.
	eventually(t, 10e9, func() error {
		var s corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-userdata"}, &s); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != vm.UID {
			return fmt.Errorf("dev-userdata owner = %+v, want the VM %s", ref, vm.UID)
		}
		return nil
	})
}
