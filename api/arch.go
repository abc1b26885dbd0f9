package api

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Architectures KubeVirt v1.9.0 runs VMs on. Its VMI admitter refuses any
// other spec.architecture ("unsupported architecture",
// pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go,
// ValidateVirtualMachineInstancePerArch).
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
	ArchS390X = "s390x"
)

// DefaultArch is the architecture of a VM that names none on a cluster whose
// KubeVirt CR names none either.
const DefaultArch = ArchAMD64

// Buses of KubeVirt v1.9.0's disks, cdroms and input devices, as the
// strings the annotations and the Arch table hold.
const (
	BusVirtio = string(kubevirtv1.DiskBusVirtio)
	BusSATA   = string(kubevirtv1.DiskBusSATA)
	BusSCSI   = string(kubevirtv1.DiskBusSCSI)
	BusUSB    = string(kubevirtv1.DiskBusUSB)
)

// DefaultDiskBus is the bus of a data disk (type disk) that names none, on
// every architecture: virtio, the paravirtual bus each one takes.
const DefaultDiskBus = BusVirtio

// Arch is what KubeVirt v1.9.0 accepts, and Virtstation chooses, for the
// devices Virtstation adds on one architecture. The lists are sorted.
type Arch struct {
	// Name is amd64, arm64 or s390x.
	Name string
	// DiskBuses are the buses of a data disk (type disk). A read-only disk
	// never goes on sata, whatever the architecture: KubeVirt refuses
	// "sata hard-disks do not support read-only".
	DiskBuses []string
	// CDROMBuses are the buses of a cdrom. virtio is never one: KubeVirt
	// refuses "Bus type virtio is invalid for CD-ROM device" everywhere.
	CDROMBuses []string
	// DefaultDiskBus and DefaultCDROMBus are what an entry that names no
	// bus gets.
	DefaultDiskBus, DefaultCDROMBus string
	// VideoTypes are the video models of domain.devices.video.type.
	VideoTypes []string
	// TabletBus is the bus of the tablet the video step adds.
	TabletBus string
}

// The rules, from KubeVirt v1.9.0:
//   - pkg/storage/admitters/disks.go validateBusSupport (every architecture,
//     at VM and VMI admission): buses are virtio, sata, scsi or usb; a cdrom
//     is never virtio; a sata disk is never read-only.
//   - pkg/virt-api/webhooks/arm64.go validateDiskBus (VMI admission): on
//     arm64 disk, cdrom and lun buses are virtio or scsi.
//   - pkg/defaults/{amd64,arm64,s390x}.go: a bus left empty becomes sata on
//     amd64 and virtio on arm64 and s390x, so a cdrom without a bus is
//     refused on arm64 and s390x. Virtstation always names the bus.
//   - pkg/virt-api/webhooks/{amd64,arm64,s390x}.go validateVideoType*
//     (VMI admission): the video models each architecture takes.
//   - s390x: KubeVirt's admission takes sata and usb disks there, but an
//     s390x guest has neither controller (virt-launcher's s390x converter
//     has no USB, IsUSBNeeded false, and its SCSI is virtio-scsi), so
//     Virtstation offers only virtio and scsi, and a virtio tablet.
var arches = map[string]Arch{
	ArchAMD64: {
		Name:           ArchAMD64,
		DiskBuses:      []string{BusSATA, BusSCSI, BusUSB, BusVirtio},
		CDROMBuses:     []string{BusSATA, BusSCSI},
		DefaultDiskBus: DefaultDiskBus, DefaultCDROMBus: BusSATA,
		VideoTypes: []string{"bochs", "cirrus", "ramfb", "vga", "virtio"},
		TabletBus:  BusUSB,
	},
	ArchARM64: {
		Name:           ArchARM64,
		DiskBuses:      []string{BusSCSI, BusVirtio},
		CDROMBuses:     []string{BusSCSI},
		DefaultDiskBus: DefaultDiskBus, DefaultCDROMBus: BusSCSI,
		VideoTypes: []string{"ramfb", "virtio"},
		TabletBus:  BusUSB,
	},
	ArchS390X: {
		Name:           ArchS390X,
		DiskBuses:      []string{BusSCSI, BusVirtio},
		CDROMBuses:     []string{BusSCSI},
		DefaultDiskBus: DefaultDiskBus, DefaultCDROMBus: BusSCSI,
		VideoTypes: []string{"virtio"},
		TabletBus:  BusVirtio,
	},
}

// What an entry may name on some architecture, before the VM's is known:
// the union of the table. The VM's Arch then says which of them it takes.
var (
	diskBuses  = onSomeArch(func(a Arch) []string { return a.DiskBuses })
	cdromBuses = onSomeArch(func(a Arch) []string { return a.CDROMBuses })
)

// onSomeArch is the union over the table of what list returns.
func onSomeArch(list func(Arch) []string) sets.Set[string] {
	out := sets.New[string]()
	for _, a := range arches {
		out.Insert(list(a)...)
	}
	return out
}

// Architectures lists the architectures LookupArch knows, sorted.
var Architectures = []string{ArchAMD64, ArchARM64, ArchS390X}

// LookupArch returns the rules of an architecture KubeVirt v1.9.0 runs VMs
// on.
func LookupArch(name string) (Arch, bool) {
	a, ok := arches[name]
	return a, ok
}

// Buses returns the buses a data disk of type t may use.
func (a Arch) Buses(t DiskType) []string {
	if t == DiskTypeCDROM {
		return a.CDROMBuses
	}
	return a.DiskBuses
}

// DefaultBus returns the bus of a data disk of type t that names none.
func (a Arch) DefaultBus(t DiskType) string {
	if t == DiskTypeCDROM {
		return a.DefaultCDROMBus
	}
	return a.DefaultDiskBus
}

// AcceptsBus reports whether a data disk of type t may use bus.
func (a Arch) AcceptsBus(t DiskType, bus string) bool {
	return slices.Contains(a.Buses(t), bus)
}

// AcceptsVideo reports whether typ is a video model of the architecture.
func (a Arch) AcceptsVideo(typ string) bool {
	return slices.Contains(a.VideoTypes, typ)
}
