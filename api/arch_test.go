package api

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TestArchRules holds the architecture table to KubeVirt v1.9.0's rules: a
// cdrom is never virtio, every default is one the architecture takes, the
// video models are those of pkg/virt-api/webhooks/{amd64,arm64,s390x}.go,
// and arm64 takes only virtio and scsi (pkg/virt-api/webhooks/arm64.go).
func TestArchRules(t *testing.T) {
	cases := map[string]struct {
		diskBuses, cdromBuses, video []string
		cdromDefault, tablet         string
	}{
		ArchAMD64: {
			diskBuses: []string{"sata", "scsi", "usb", "virtio"}, cdromBuses: []string{"sata", "scsi"},
			video: []string{"bochs", "cirrus", "ramfb", "vga", "virtio"}, cdromDefault: "sata", tablet: "usb",
		},
		ArchARM64: {
			diskBuses: []string{"scsi", "virtio"}, cdromBuses: []string{"scsi"},
			video: []string{"ramfb", "virtio"}, cdromDefault: "scsi", tablet: "usb",
		},
		ArchS390X: {
			diskBuses: []string{"scsi", "virtio"}, cdromBuses: []string{"scsi"},
			video: []string{"virtio"}, cdromDefault: "scsi", tablet: "virtio",
		},
	}
	if len(cases) != len(Architectures) {
		t.Fatalf("Architectures = %v, want the %d of the table", Architectures, len(cases))
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, ok := LookupArch(name)
			if !ok || a.Name != name {
				t.Fatalf("LookupArch(%q) = %+v, %v", name, a, ok)
			}
			if !slices.Equal(a.DiskBuses, tc.diskBuses) || !slices.Equal(a.CDROMBuses, tc.cdromBuses) || !slices.Equal(a.VideoTypes, tc.video) {
				t.Errorf("rules = %+v, want disk %v cdrom %v video %v", a, tc.diskBuses, tc.cdromBuses, tc.video)
			}
			if a.DefaultBus(DiskTypeDisk) != "virtio" || a.DefaultBus(DiskTypeCDROM) != tc.cdromDefault || a.TabletBus != tc.tablet {
				t.Errorf("defaults = disk %s cdrom %s tablet %s, want virtio %s %s", a.DefaultDiskBus, a.DefaultCDROMBus, a.TabletBus, tc.cdromDefault, tc.tablet)
			}
			for _, typ := range []DiskType{DiskTypeDisk, DiskTypeCDROM} {
				if !a.AcceptsBus(typ, a.DefaultBus(typ)) {
					t.Errorf("the default %s bus %s is not one %s takes", typ, a.DefaultBus(typ), name)
				}
				for _, b := range a.Buses(typ) {
					if !diskBuses.Has(b) {
						t.Errorf("%s bus %s is no bus KubeVirt knows", typ, b)
					}
				}
			}
			if a.AcceptsBus(DiskTypeCDROM, "virtio") {
				t.Error("a virtio cdrom: KubeVirt refuses it on every architecture")
			}
			for _, v := range a.VideoTypes {
				if !slices.Contains(VideoTypes, v) || !a.AcceptsVideo(v) {
					t.Errorf("video %s is not in VideoTypes", v)
				}
			}
		})
	}
	if _, ok := LookupArch("ppc64le"); ok {
		t.Error("LookupArch(ppc64le): KubeVirt v1.9.0 runs no VM there")
	}
	if _, ok := LookupArch(DefaultArch); !ok {
		t.Errorf("DefaultArch %q is not in the table", DefaultArch)
	}
}

// TestOnSomeArch holds what an entry may name before its VM's architecture
// is known to the union of the table.
func TestOnSomeArch(t *testing.T) {
	if got, want := sets.List(diskBuses), []string{BusSATA, BusSCSI, BusUSB, BusVirtio}; !slices.Equal(got, want) {
		t.Errorf("disk buses = %v, want %v", got, want)
	}
	if got, want := sets.List(cdromBuses), []string{BusSATA, BusSCSI}; !slices.Equal(got, want) {
		t.Errorf("cdrom buses = %v, want %v", got, want)
	}
	if want := []string{"bochs", "cirrus", "ramfb", "vga", "virtio"}; !slices.Equal(VideoTypes, want) {
		t.Errorf("VideoTypes = %v, want %v", VideoTypes, want)
	}
}
