package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// TestClusterDefaultArchitecture: on a cluster whose KubeVirt CR says
// defaultArchitecture arm64, a VM that names no architecture gets what
// KubeVirt v1.9.0 accepts on arm64 (a scsi cdrom, not the amd64 sata one),
// and vga video, which arm64 refuses at start, is denied at apply time. A VM
// that names amd64 keeps amd64's choices.
//
// It is not parallel: the KubeVirt CR is cluster-wide, so it exists only
// while this test runs, and is deleted before the parallel tests resume.
func TestClusterDefaultArchitecture(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "arch")
	createPVC(t, ns, "iso", true)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iso"}})

	kvNS := newNamespace(t, "kubevirt")
	kv := &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Namespace: kvNS, Name: "kubevirt"},
		Spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			ArchitectureConfiguration: &kubevirtv1.ArchConfiguration{DefaultArchitecture: api.ArchARM64},
		}},
	}
	if err := env.Client.Create(ctx, kv, strict); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), kv); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete KubeVirt CR: %v", err)
		}
		// Later tests must see the amd64 default again.
		eventually(t, 10*time.Second, func() error {
			return absentFromCache(&kubevirtv1.KubeVirt{}, client.ObjectKeyFromObject(kv))
		})
	})
	waitCached(t, &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: kvNS, Name: "kubevirt"}})

	withCDROM := withAnnotation(api.AnnotationDataDisks, `[{"name":"iso","type":"cdrom"}]`)
	cases := map[string]struct {
		vm        string
		arch      string // the VM's spec.template.spec.architecture
		video     string
		wantBus   kubevirtv1.DiskBus
		wantTab   kubevirtv1.InputBus
		wantDeny  string // a part of the denial, when denied
		denyField string
	}{
		"no architecture: arm64's scsi cdrom and ramfb": {vm: "default-ramfb", video: "ramfb", wantBus: "scsi", wantTab: "usb"},
		"no architecture: vga is denied":                {vm: "default-vga", video: "vga", wantDeny: `refuses video model "vga" on arm64`, denyField: "metadata.annotations[virtstation.io/video]"},
		"amd64 named: sata cdrom and vga":               {vm: "amd64-vga", arch: api.ArchAMD64, video: "vga", wantBus: "sata", wantTab: "usb"},
		"s390x named: scsi cdrom and a virtio tablet":   {vm: "s390x-virtio", arch: api.ArchS390X, video: "virtio", wantBus: "scsi", wantTab: "virtio"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vm := newVM(ns, tc.vm, managed, withCDROM, withAnnotation(api.AnnotationVideo, tc.video),
				func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template.Spec.Architecture = tc.arch })
			err := env.Client.Create(ctx, vm, strict)
			if tc.wantDeny != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantDeny) || !strings.Contains(err.Error(), tc.denyField) || !strings.Contains(err.Error(), "rule: video") {
					t.Fatalf("err = %v, want a denial at %s containing %q", err, tc.denyField, tc.wantDeny)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			iso := findDisk(vm, "vs-iso")
			if iso == nil || iso.CDRom == nil || iso.CDRom.Bus != tc.wantBus {
				t.Fatalf("iso disk = %+v, want a %s cdrom", iso, tc.wantBus)
			}
			devs := vm.Spec.Template.Spec.Domain.Devices
			if devs.Video == nil || devs.Video.Type != tc.video {
				t.Errorf("video = %+v, want %s", devs.Video, tc.video)
			}
			if len(devs.Inputs) != 1 || devs.Inputs[0].Bus != tc.wantTab {
				t.Errorf("inputs = %+v, want one %s tablet", devs.Inputs, tc.wantTab)
			}
		})
	}
}

// absentFromCache is nil once the webhook's cache no longer holds key.
func absentFromCache(obj client.Object, key client.ObjectKey) error {
	err := env.Manager.GetCache().Get(context.Background(), key, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return apierrors.NewAlreadyExists(kubevirtv1.Resource("kubevirts"), key.Name)
	}
	return err
}
