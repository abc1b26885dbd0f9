package envtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
)

// TestClusterDefaultArchitecture: on a cluster whose KubeVirt CR says
// defaultArchitecture arm64, a VM that names no architecture gets what
// KubeVirt v1.9.0 accepts on arm64 (a scsi cdrom, not the amd64 sata one),
// and vga video, which arm64 refuses at start, is denied at apply time. A VM
// that names amd64 keeps amd64's choices. KubeVirt's own admission follows
// the same CR, so it judges what Virtstation wrote as arm64.
//
// It is not parallel: the KubeVirt CR is cluster-wide, so it says arm64
// only while this test runs, and amd64 again before the parallel tests
// resume.
func TestClusterDefaultArchitecture(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "arch")
	createPVC(t, ns, "iso", true)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iso"}})

	// A VM Virtstation does not manage, with a sata disk: KubeVirt starts it
	// on amd64 and refuses it on arm64.
	sataVM := func(name string) *kubevirtv1.VirtualMachine {
		return newVM(ns, name, func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.Template.Spec.Domain.Devices.Disks[0].Disk.Bus = kubevirtv1.DiskBusSATA
		})
	}
	setClusterDefaultArchitecture(t, api.ArchARM64)
	t.Cleanup(func() {
		// Later tests must see the amd64 default again, in Virtstation's
		// cache and in KubeVirt's own admission.
		setClusterDefaultArchitecture(t, api.ArchAMD64)
		eventually(t, 10*time.Second, func() error {
			return env.Client.Create(context.Background(), sataVM("sata-amd64-again"), client.DryRunAll)
		})
	})
	// KubeVirt's own admission follows the same CR: its arm64 rules refuse
	// the sata disk at start.
	eventually(t, 10*time.Second, func() error {
		err := env.Client.Create(ctx, sataVM("sata-arm64"), client.DryRunAll)
		if err == nil {
			return errors.New("KubeVirt's admission does not judge as arm64 yet: the sata VM is admitted")
		}
		if !strings.Contains(err.Error(), "Arm64 not support this disk bus type") {
			return fmt.Errorf("KubeVirt's admission refused the sata VM for another reason: %w", err)
		}
		return nil
	})

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

// setClusterDefaultArchitecture writes the test control plane's KubeVirt CR
// as virt-operator would for a cluster defaulting to arch (spec and
// status), and waits until Virtstation's cache sees it.
func setClusterDefaultArchitecture(t *testing.T, arch string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: testenv.KubeVirtNamespace, Name: testenv.KubeVirtCRName}
	eventually(t, 10*time.Second, func() error {
		var kv kubevirtv1.KubeVirt
		if err := env.Client.Get(ctx, key, &kv); err != nil {
			return err
		}
		kv.Spec.Configuration.ArchitectureConfiguration = &kubevirtv1.ArchConfiguration{DefaultArchitecture: arch}
		// virt-api reads the default from status. (The CRD from
		// kubevirt.io/api has no status subresource.)
		kv.Status.DefaultArchitecture = arch
		return env.Client.Update(ctx, &kv)
	})
	eventually(t, 10*time.Second, func() error {
		var kv kubevirtv1.KubeVirt
		if err := env.Manager.GetCache().Get(ctx, key, &kv); err != nil {
			return err
		}
		if kv.Status.DefaultArchitecture != arch {
			return fmt.Errorf("the webhook's cache still has %q", kv.Status.DefaultArchitecture)
		}
		return nil
	})
}
