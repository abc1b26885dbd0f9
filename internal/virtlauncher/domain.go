package virtlauncher

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Host is what the I/O side prepared for Domain: where each volume's bytes
// are, and the sockets and address QEMU serves.
type Host struct {
	Image Image
	// Volumes are the files behind the VMI's volumes, by volume name.
	Volumes map[string]Backing
	// VNC, Serial, QMP and Agent are unix socket paths; SerialLog receives
	// everything the guest writes on its serial console.
	VNC, Serial, SerialLog, QMP, Agent string
	// SSHAddr is the loopback host:port the guest's port 22 is forwarded to.
	SSHAddr string
}

// Backing is the file behind one volume.
type Backing struct {
	Path string
	// Snapshot discards the guest's writes at exit (a containerDisk).
	Snapshot bool
}

// volumeKind is how a volume is presented.
type volumeKind int

const (
	guestImage volumeKind = iota // containerDisk: the guest image
	claim                        // dataVolume or persistentVolumeClaim: a raw file per claim
	emptyDisk                    // a blank file per boot
	noCloud                      // cloudInitNoCloud: the ISO
)

// classify says how volume v is presented, and for a claim which
// DataVolume or PVC it is.
func classify(v kubevirtv1.Volume) (kind volumeKind, disk api.ClaimRef, err error) {
	if v.ContainerDisk != nil {
		return guestImage, api.ClaimRef{}, nil
	}
	if disk, ok := api.VolumeClaim(v.VolumeSource); ok {
		return claim, disk, nil
	}
	switch {
	case v.EmptyDisk != nil:
		return emptyDisk, api.ClaimRef{}, nil
	case v.CloudInitNoCloud != nil:
		return noCloud, api.ClaimRef{}, nil
	}
	return 0, api.ClaimRef{}, fmt.Errorf("virtlauncher: volume %q: only containerDisk, dataVolume, persistentVolumeClaim, emptyDisk and cloudInitNoCloud volumes are presented by this stand-in", v.Name)
}

// Domain is the QEMU command line for vmi on h: the guest's devices as
// virt-launcher's libvirt domain would give them (see the package
// documentation). It is a pure function of its arguments.
func Domain(vmi *kubevirtv1.VirtualMachineInstance, h Host) ([]string, error) {
	spec := &vmi.Spec
	dev := &spec.Domain.Devices
	if err := unpresentable(spec); err != nil {
		return nil, err
	}
	mem, err := memoryMiB(spec)
	if err != nil {
		return nil, err
	}
	serial := dev.AutoattachSerialConsole == nil || *dev.AutoattachSerialConsole
	args := []string{
		"-nodefaults", "-no-user-config",
		// KubeVirt's amd64 machine type is q35; TCG because the tests have no KVM.
		"-machine", "q35,accel=tcg",
		"-smp", smp(spec.Domain.CPU),
		"-m", strconv.FormatInt(mem, 10),
		"-display", "none",
		"-kernel", h.Image.Kernel, "-initrd", h.Image.Initrd,
		"-append", kernelCommandLine(serial),
		"-qmp", "unix:" + h.QMP + ",server=on,wait=off",
		// virt-launcher always adds the guest agent's channel.
		"-device", "virtio-serial-pci,id=virtio-serial0",
		"-chardev", "socket,id=charchannel0,path=" + h.Agent + ",server=on,wait=off",
		"-device", "virtserialport,bus=virtio-serial0.0,chardev=charchannel0,name=org.qemu.guest_agent.0",
	}
	if serial {
		args = append(args,
			"-chardev", "socket,id=charserial0,path="+h.Serial+",server=on,wait=off,logfile="+h.SerialLog,
			"-serial", "chardev:charserial0")
	}
	args = append(args, graphics(dev, h.VNC)...)
	disks, err := diskArgs(spec, h)
	if err != nil {
		return nil, err
	}
	args = append(args, disks...)
	nic, err := interfaceArgs(spec, h.SSHAddr)
	if err != nil {
		return nil, err
	}
	args = append(args, nic...)
	args = append(args, inputArgs(dev.Inputs)...)
	return args, nil
}

// kernelCommandLine boots the guest image: its root by label, its consoles
// on the VGA screen and, when there is one, the serial line (last, so
// systemd's console and the serial getty are there).
func kernelCommandLine(serial bool) string {
	cmd := "root=LABEL=" + RootLabel + " ro console=tty0"
	if serial {
		cmd += " console=ttyS0,115200"
	}
	return cmd
}

// unpresentable refuses what a QEMU without the cluster's hardware cannot
// present.
func unpresentable(spec *kubevirtv1.VirtualMachineInstanceSpec) error {
	dev := &spec.Domain.Devices
	switch {
	case len(dev.GPUs) > 0:
		return fmt.Errorf("virtlauncher: spec.domain.devices.gpus: this stand-in has no GPUs to present")
	case len(dev.HostDevices) > 0:
		return fmt.Errorf("virtlauncher: spec.domain.devices.hostDevices: this stand-in has no host devices to present")
	case len(dev.Filesystems) > 0:
		return fmt.Errorf("virtlauncher: spec.domain.devices.filesystems: not presented by this stand-in")
	}
	return nil
}

// memoryMiB is the guest's memory: domain.memory.guest, else the memory
// request, as KubeVirt sizes the domain.
func memoryMiB(spec *kubevirtv1.VirtualMachineInstanceSpec) (int64, error) {
	var q *resource.Quantity
	if m := spec.Domain.Memory; m != nil && m.Guest != nil {
		q = m.Guest
	} else if r, ok := spec.Domain.Resources.Requests["memory"]; ok {
		q = &r
	}
	if q == nil || q.Value() <= 0 {
		return 0, fmt.Errorf("virtlauncher: spec.domain.memory.guest: the VMI names no memory")
	}
	return (q.Value() + 1<<20 - 1) >> 20, nil
}

// smp is the CPU topology; KubeVirt's defaults are one of each.
func smp(cpu *kubevirtv1.CPU) string {
	sockets, cores, threads := uint32(1), uint32(1), uint32(1)
	if cpu != nil {
		sockets, cores, threads = orOne(cpu.Sockets), orOne(cpu.Cores), orOne(cpu.Threads)
	}
	return fmt.Sprintf("cpus=%d,sockets=%d,cores=%d,threads=%d", sockets*cores*threads, sockets, cores, threads)
}

func orOne(n uint32) uint32 {
	if n == 0 {
		return 1
	}
	return n
}

// graphics is the VNC display and the video device: the VMI's video type,
// else KubeVirt's amd64 default (vga; bochs for EFI guests), none when
// autoattachGraphicsDevice is false. The models are libvirt's devices for
// them.
func graphics(dev *kubevirtv1.Devices, vnc string) []string {
	if dev.AutoattachGraphicsDevice != nil && !*dev.AutoattachGraphicsDevice {
		return nil
	}
	model := "vga"
	if dev.Video != nil && dev.Video.Type != "" {
		model = dev.Video.Type
	}
	qemuDevice := map[string]string{
		"vga":    "VGA,vgamem_mb=16",
		"virtio": "virtio-vga",
		"bochs":  "bochs-display",
		"cirrus": "cirrus-vga",
		"ramfb":  "ramfb",
	}[model]
	if qemuDevice == "" {
		qemuDevice = model // QEMU names what it does not know
	}
	return []string{"-vnc", "unix:" + vnc, "-device", qemuDevice}
}

// diskArgs presents every disk in order on its bus.
func diskArgs(spec *kubevirtv1.VirtualMachineInstanceSpec, h Host) ([]string, error) {
	volumes := map[string]kubevirtv1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var args []string
	var scsi, usb bool
	sata := 0
	for i, d := range spec.Domain.Devices.Disks {
		v, ok := volumes[d.Name]
		if !ok {
			return nil, fmt.Errorf("virtlauncher: disk %q has no volume", d.Name)
		}
		b, ok := h.Volumes[d.Name]
		if !ok {
			return nil, fmt.Errorf("virtlauncher: volume %q has no backing file", d.Name)
		}
		id := "drive-" + strconv.Itoa(i)
		drive := "file=" + b.Path + ",format=raw,if=none,id=" + id
		if b.Snapshot {
			drive += ",snapshot=on"
		}
		bus, device, readOnly, err := diskDevice(d, v)
		if err != nil {
			return nil, err
		}
		if readOnly {
			drive += ",readonly=on"
		}
		switch bus {
		case kubevirtv1.DiskBusSATA:
			if sata == 6 {
				return nil, fmt.Errorf("virtlauncher: disk %q: q35's AHCI has 6 ports", d.Name)
			}
			device += ",bus=ide." + strconv.Itoa(sata)
			sata++
		case kubevirtv1.DiskBusSCSI:
			if !scsi {
				args = append(args, "-device", "virtio-scsi-pci,id=scsi0")
				scsi = true
			}
			device += ",bus=scsi0.0"
		case kubevirtv1.DiskBusUSB:
			if !usb {
				args = append(args, "-device", "qemu-xhci,id=usb-storage")
				usb = true
			}
			device += ",bus=usb-storage.0"
		}
		device += ",drive=" + id
		if d.Serial != "" {
			device += ",serial=" + d.Serial
		}
		args = append(args, "-drive", drive, "-device", device)
	}
	return args, nil
}

// diskDevice is the QEMU device for disk d on volume v, its bus, and
// whether it is read-only.
func diskDevice(d kubevirtv1.Disk, v kubevirtv1.Volume) (bus kubevirtv1.DiskBus, device string, readOnly bool, err error) {
	if strings.ContainsAny(d.Serial, ",=") {
		return "", "", false, fmt.Errorf("virtlauncher: disk %q: serial %q", d.Name, d.Serial)
	}
	pvcReadOnly := v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
	switch {
	case d.CDRom != nil:
		bus = d.CDRom.Bus
		readOnly = d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly
		switch bus {
		case kubevirtv1.DiskBusSATA, "":
			return kubevirtv1.DiskBusSATA, "ide-cd", readOnly, nil
		case kubevirtv1.DiskBusSCSI:
			return bus, "scsi-cd", readOnly, nil
		}
	case d.Disk != nil:
		bus = d.Disk.Bus
		readOnly = d.Disk.ReadOnly || pvcReadOnly
		switch bus {
		case kubevirtv1.DiskBusVirtio, "":
			return kubevirtv1.DiskBusVirtio, "virtio-blk-pci", readOnly, nil
		case kubevirtv1.DiskBusSATA:
			return bus, "ide-hd", readOnly, nil
		case kubevirtv1.DiskBusSCSI:
			return bus, "scsi-hd", readOnly, nil
		case kubevirtv1.DiskBusUSB:
			return bus, "usb-storage", readOnly, nil
		}
	default:
		return "", "", false, fmt.Errorf("virtlauncher: disk %q: only disk and cdrom devices are presented by this stand-in", d.Name)
	}
	return "", "", false, fmt.Errorf("virtlauncher: disk %q: bus %q is not presented by this stand-in", d.Name, bus)
}

// interfaceArgs presents the one pod-network interface: QEMU user
// networking, DHCP as behind KubeVirt's masquerade, port 22 forwarded.
func interfaceArgs(spec *kubevirtv1.VirtualMachineInstanceSpec, sshAddr string) ([]string, error) {
	ifaces := spec.Domain.Devices.Interfaces
	switch {
	case len(ifaces) == 0:
		return []string{"-nic", "none"}, nil
	case len(ifaces) > 1 || len(spec.Networks) != 1 || spec.Networks[0].Pod == nil || spec.Networks[0].Name != ifaces[0].Name:
		return nil, fmt.Errorf("virtlauncher: spec.networks: only one pod network interface is presented by this stand-in")
	}
	iface := ifaces[0]
	host, port, ok := strings.Cut(sshAddr, ":")
	if !ok {
		return nil, fmt.Errorf("virtlauncher: SSH address %q is not host:port", sshAddr)
	}
	model := map[string]string{"": "virtio-net-pci", "virtio": "virtio-net-pci", "e1000": "e1000", "e1000e": "e1000e", "rtl8139": "rtl8139"}[iface.Model]
	if model == "" {
		return nil, fmt.Errorf("virtlauncher: interface %q: model %q is not presented by this stand-in", iface.Name, iface.Model)
	}
	device := model + ",netdev=net0"
	if iface.MacAddress != "" {
		device += ",mac=" + iface.MacAddress
	}
	return []string{
		"-netdev", "user,id=net0,hostfwd=tcp:" + host + ":" + port + "-:22",
		"-device", device,
	}, nil
}

// inputArgs presents the tablets.
func inputArgs(inputs []kubevirtv1.Input) []string {
	var args []string
	usb := false
	for i, in := range inputs {
		id := "input" + strconv.Itoa(i)
		if in.Bus == kubevirtv1.InputBusVirtio {
			args = append(args, "-device", "virtio-tablet-pci,id="+id)
			continue
		}
		if !usb {
			args = append(args, "-device", "qemu-xhci,id=usb")
			usb = true
		}
		args = append(args, "-device", "usb-tablet,bus=usb.0,id="+id)
	}
	return args
}
