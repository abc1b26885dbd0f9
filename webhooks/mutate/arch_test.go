package mutate

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

func TestKubeVirtDefaultArchitecture(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	kv := func(name string, created metav1.Time, spec, status string) kubevirtv1.KubeVirt {
		k := kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: name, CreationTimestamp: created}}
		if spec != "" {
			k.Spec.Configuration.ArchitectureConfiguration = &kubevirtv1.ArchConfiguration{DefaultArchitecture: spec}
		}
		k.Status.DefaultArchitecture = status
		return k
	}
	deleting := kv("old", t0, "s390x", "")
	deleting.DeletionTimestamp = &t1
	cases := map[string]struct {
		kvs  []kubevirtv1.KubeVirt
		want string
	}{
		"no KubeVirt CR":               {want: ""},
		"a CR naming none":             {kvs: []kubevirtv1.KubeVirt{kv("kubevirt", t0, "", "")}, want: ""},
		"the spec, before an operator": {kvs: []kubevirtv1.KubeVirt{kv("kubevirt", t0, "arm64", "")}, want: "arm64"},
		// virt-api reads the status, which virt-operator fills from the
		// spec or its own GOARCH.
		"the status wins over the spec": {kvs: []kubevirtv1.KubeVirt{kv("kubevirt", t0, "amd64", "arm64")}, want: "arm64"},
		"the status alone":              {kvs: []kubevirtv1.KubeVirt{kv("kubevirt", t0, "", "s390x")}, want: "s390x"},
		"the oldest of two":             {kvs: []kubevirtv1.KubeVirt{kv("b", t1, "amd64", ""), kv("a", t0, "arm64", "")}, want: "arm64"},
		"one being deleted is skipped":  {kvs: []kubevirtv1.KubeVirt{deleting, kv("new", t1, "arm64", "")}, want: "arm64"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := KubeVirtDefaultArchitecture(tc.kvs); got != tc.want {
				t.Errorf("KubeVirtDefaultArchitecture = %q, want %q", got, tc.want)
			}
		})
	}
}

// archFuzzSeeds are VMs whose data disks and video depend on the
// architecture.
func archFuzzSeeds() []string {
	// No mount path: the merged user-data would outgrow the inline limit
	// and go to a Secret, which the fuzz target does not write.
	disks := `[{"name":"home"},{"name":"iso","type":"cdrom"}]`
	var out []string
	for _, arch := range []string{"", api.ArchAMD64, api.ArchARM64, api.ArchS390X, "ppc64le"} {
		for _, video := range []string{"virtio", "vga", "ramfb"} {
			spec := specParts{spec: map[string]any{"architecture": arch}}.String()
			out = append(out, vmJSON(stepAnn(api.AnnotationDataDisks, disks, api.AnnotationVideo, video), spec))
		}
	}
	out = append(out,
		vmJSON(stepAnn(api.AnnotationDataDisks, `[{"name":"home","bus":"sata","readOnly":true}]`), specParts{}.String()),
		vmJSON(stepAnn(api.AnnotationDataDisks, `[{"name":"iso","type":"cdrom","bus":"sata"}]`), specParts{spec: map[string]any{"architecture": api.ArchARM64}}.String()),
	)
	return out
}

// checkArchHeld fails when an admitted mutation gave a device Virtstation
// owns a bus or model KubeVirt v1.9.0 refuses on the VM's architecture (the
// fuzz cluster names no default, so a VM naming none is amd64).
func checkArchHeld(t *testing.T, res Result) {
	t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := json.Unmarshal([]byte(toJSON(res.Object)), &vm); err != nil || vm.Spec.Template == nil {
		return
	}
	name := vm.Spec.Template.Spec.Architecture
	if name == "" {
		name = api.DefaultArch
	}
	arch, ok := api.LookupArch(name)
	owned := map[string]bool{}
	for _, d := range res.Injected.DataDisks {
		owned[d.Disk] = true
	}
	if !ok && (len(owned) > 0 || res.Injected.Video != nil) {
		t.Fatalf("admitted devices on architecture %q, which KubeVirt runs no VM on: %s", name, toJSON(res.Injected))
	}
	devs := vm.Spec.Template.Spec.Domain.Devices
	for _, d := range devs.Disks {
		if !owned[d.Name] {
			continue
		}
		switch {
		case d.CDRom != nil:
			if !arch.AcceptsBus(api.DiskTypeCDROM, string(d.CDRom.Bus)) {
				t.Fatalf("cdrom %s on %s bus %q: KubeVirt refuses it", d.Name, name, d.CDRom.Bus)
			}
		case d.Disk != nil:
			if !arch.AcceptsBus(api.DiskTypeDisk, string(d.Disk.Bus)) {
				t.Fatalf("disk %s on %s bus %q: KubeVirt refuses it", d.Name, name, d.Disk.Bus)
			}
			if d.Disk.Bus == "sata" && d.Disk.ReadOnly {
				t.Fatalf("disk %s is a read-only sata disk: KubeVirt refuses it", d.Name)
			}
		}
	}
	if res.Injected.Video != nil && (devs.Video == nil || !arch.AcceptsVideo(devs.Video.Type)) {
		t.Fatalf("video %+v on %s: KubeVirt refuses it", devs.Video, name)
	}
}
