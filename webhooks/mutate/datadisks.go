package mutate

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

var (
	pathDisks   = []string{"spec", "template", "spec", "domain", "devices", "disks"}
	pathVolumes = []string{"spec", "template", "spec", "volumes"}
)

// maxSerial is the longest serial the guest shows in full in
// /dev/disk/by-id/virtio-<serial>.
const maxSerial = 20

var serialUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.+-]`)

// diskSerial is the stable serial of a data disk: its name when that fits,
// otherwise a prefix and a hash of the whole name.
func diskSerial(name string) string {
	s := serialUnsafe.ReplaceAllString(name, "-")
	if len(s) <= maxSerial && s == name {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(name)) // hash.Hash.Write never fails
	return fmt.Sprintf("%s-%08x", s[:min(len(s), maxSerial-9)], h.Sum32())
}

// diskName is the name of a data disk's disk and volume in the VM spec: a
// DNS label with Virtstation's prefix, derived from the serial.
func diskName(serial string) string {
	return "vs-" + strings.ToLower(strings.NewReplacer(".", "-", "_", "-", "+", "-").Replace(serial))
}

// attachDataDisks attaches the disks of virtstation.io/data-disks and
// records them; the cloud-init step mounts them.
func attachDataDisks(m *mutation) error {
	fld := field.NewPath("metadata", "annotations").Key(api.AnnotationDataDisks)
	wanted, errs := api.ParseDataDisks(m.in.VM.Annotations[api.AnnotationDataDisks], fld)
	if len(errs) > 0 {
		m.deny(errs, policy.RuleDataDisks, "use name:/mount,… or a JSON list of {name, mountPath, type, bus, readOnly}")
		return nil
	}
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	if len(wanted) > 0 {
		arch, ok, err := m.archOf(policy.RuleDataDisks)
		if err != nil || !ok {
			return err
		}
		if errs := chooseBuses(wanted, arch, fld); len(errs) > 0 {
			m.denied = append(m.denied, errs...)
			return nil
		}
	}
	attach, err := m.resolveDataDisks(wanted, fld)
	if err != nil || len(m.denied) > 0 {
		return err
	}
	if err := m.checkAttachmentChange(attach); err != nil || len(m.denied) > 0 {
		return err
	}
	owned := sets.New[string]()
	for _, d := range m.prev.DataDisks {
		owned.Insert(d.Disk)
	}
	for _, d := range m.oldInjected().DataDisks {
		owned.Insert(d.Disk)
	}
	if m.checkDiskNames(attach, owned, fld); len(m.denied) > 0 {
		return nil
	}
	if len(attach) > 0 || owned.Len() > 0 {
		m.writeDataDisks(attach, owned)
	}
	if len(attach) > 0 {
		m.injected.DataDisks = attach
	}
	return nil
}

// resolveDataDisks looks up each wanted disk and gives it its serial and
// name in the VM, denying a disk that is not there or not labelled, and
// two that would get the same serial or name.
func (m *mutation) resolveDataDisks(wanted []api.DataDisk, fld *field.Path) ([]api.InjectedDisk, error) {
	attach := make([]api.InjectedDisk, 0, len(wanted))
	serials, diskNames := sets.New[string](), sets.New[string]()
	for i, d := range wanted {
		disk, ok, err := m.cluster.Disk(m.ctx, m.in.Namespace, d.Name)
		if err != nil {
			return nil, fmt.Errorf("look up data disk %s: %w", d.Name, err)
		}
		if !ok || !disk.Labelled {
			m.denied = append(m.denied, field.NotFound(fld.Index(i).Child("name"), d.Name))
			m.denied[len(m.denied)-1].Detail = policy.Explain(
				fmt.Sprintf("no DataVolume or PVC %q labelled %s=true in namespace %s", d.Name, api.LabelDataDisk, m.in.Namespace),
				policy.RuleDataDisks, fmt.Sprintf("create it, or label it %s=true", api.LabelDataDisk))
			continue
		}
		serial := diskSerial(d.Name)
		if serials.Has(serial) || diskNames.Has(diskName(serial)) {
			m.deny(field.ErrorList{field.Invalid(fld.Index(i).Child("name"), d.Name, fmt.Sprintf(
				"gets the same disk serial or name (%s, %s) as an earlier entry", serial, diskName(serial)))},
				policy.RuleDataDisks, "rename one of the DataVolumes/PVCs so that their names differ in more than '.' and '-'")
			continue
		}
		serials.Insert(serial)
		diskNames.Insert(diskName(serial))
		attach = append(attach, api.InjectedDisk{
			Name: d.Name, Kind: disk.Kind, Disk: diskName(serial), Serial: serial,
			Type: string(d.Type), Bus: d.Bus, ReadOnly: d.ReadOnly, MountPath: d.MountPath,
		})
	}
	return attach, nil
}

// checkDiskNames denies a disk of the user's that uses a data disk's
// serial, and a data disk whose name a disk or volume of the user's has.
func (m *mutation) checkDiskNames(attach []api.InjectedDisk, owned sets.Set[string], fld *field.Path) {
	serials := sets.New[string]()
	for _, d := range attach {
		serials.Insert(d.Serial)
	}
	spec := &m.in.VM.Spec.Template.Spec
	taken := sets.New[string]()
	for _, d := range spec.Domain.Devices.Disks {
		taken.Insert(d.Name)
		if d.Serial != "" && serials.Has(d.Serial) && !owned.Has(d.Name) {
			m.deny(field.ErrorList{field.Duplicate(field.NewPath("spec", "template", "spec", "domain", "devices", "disks").Key(d.Name).Child("serial"), d.Serial)},
				policy.RuleDataDisks, "give your disk another serial: Virtstation uses the data disk's name")
		}
	}
	for _, v := range spec.Volumes {
		taken.Insert(v.Name)
	}
	taken = taken.Difference(owned)
	taken.Delete("")
	for _, d := range attach {
		if taken.Has(d.Disk) {
			m.denied = append(m.denied, field.Invalid(fld, d.Name, policy.Explain(
				fmt.Sprintf("the VM already has a disk or volume named %q", d.Disk), policy.RuleDataDisks, "rename yours, Virtstation uses the vs- prefix")))
		}
	}
}

// writeDataDisks puts the data disks' disks and volumes in the VM. Entries
// keep their place: reordering disks would mark a running VM
// RestartRequired for nothing.
func (m *mutation) writeDataDisks(attach []api.InjectedDisk, owned sets.Set[string]) {
	wantDisks, wantVolumes := map[string]kubevirtv1.Disk{}, map[string]kubevirtv1.Volume{}
	order := make([]string, len(attach))
	for i, d := range attach {
		wantDisks[d.Disk], wantVolumes[d.Disk] = diskEntry(d), volumeEntry(d)
		order[i] = d.Disk
	}
	spec := &m.vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = reconcileList(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) string { return d.Name }, owned, wantDisks, order)
	spec.Volumes = reconcileList(spec.Volumes, func(v kubevirtv1.Volume) string { return v.Name }, owned, wantVolumes, order)
}

// chooseBuses gives each entry that names no bus the architecture's
// default, and denies one whose bus the architecture does not take: KubeVirt
// would admit the VM and refuse its VMI at start.
func chooseBuses(disks []api.DataDisk, arch api.Arch, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range disks {
		d := &disks[i]
		if d.Bus == "" {
			d.Bus = arch.DefaultBus(d.Type)
			continue
		}
		if !arch.AcceptsBus(d.Type, d.Bus) {
			e := field.NotSupported(fld.Index(i).Child("bus"), d.Bus, arch.Buses(d.Type))
			e.Detail = policy.Explain(fmt.Sprintf("KubeVirt v1.9.0 takes no %s on the %s bus on %s: %s", d.Type, d.Bus, arch.Name, e.Detail),
				policy.RuleDataDisks, fmt.Sprintf("use bus %s, or leave bus out", arch.DefaultBus(d.Type)))
			errs = append(errs, e)
		}
	}
	return errs
}

// checkAttachmentChange denies a change of the attached data disks unless
// the VM is stopped and its VMI is gone: KubeVirt would otherwise mark it
// RestartRequired, and a disk could be claimed by two running VMs.
func (m *mutation) checkAttachmentChange(attach []api.InjectedDisk) error {
	if m.in.Operation != admissionv1.Update || m.in.OldVM == nil {
		return nil
	}
	if sameAttachments(m.oldInjected().DataDisks, attach) {
		return nil
	}
	running, err := m.cluster.VMIExists(m.ctx, m.in.Namespace, m.in.Name)
	if err != nil {
		return fmt.Errorf("look up VMI: %w", err)
	}
	switch {
	case !running && halted(m.in.OldVM):
	case m.released:
		m.denied = append(m.denied, field.Forbidden(field.NewPath("metadata", "labels").Key(api.LabelManaged),
			policy.Explain("removing this label detaches the data disks Virtstation attached, and data disks can change only while the VM is stopped and its VMI is gone",
				policy.RuleDataDisks, stopFix(m.in.Name))))
	default:
		m.denied = append(m.denied, field.Forbidden(field.NewPath("metadata", "annotations").Key(api.AnnotationDataDisks),
			policy.Explain("data disks can change only while the VM is stopped and its VMI is gone", policy.RuleDataDisks, stopFix(m.in.Name))))
	}
	return nil
}

// stopFix is how to change the data disks of VM name.
func stopFix(name string) string {
	return fmt.Sprintf("virtctl stop %s, wait until the VMI is deleted, then apply again", name)
}

// halted reports whether the stored VM is set to stay stopped.
func halted(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.RunStrategy != nil {
		return *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted
	}
	//nolint:staticcheck // spec.running is deprecated but still honoured by KubeVirt
	return vm.Spec.Running == nil || !*vm.Spec.Running
}

func sameAttachments(a, b []api.InjectedDisk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Bus != y.Bus || x.ReadOnly != y.ReadOnly || x.Kind != y.Kind {
			return false
		}
	}
	return true
}

func diskEntry(d api.InjectedDisk) kubevirtv1.Disk {
	target := &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBus(d.Bus), ReadOnly: d.ReadOnly}
	if d.Type == string(api.DiskTypeCDROM) {
		return kubevirtv1.Disk{Name: d.Disk, DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: target.Bus, ReadOnly: cdromReadOnly(d.ReadOnly)}}}
	}
	return kubevirtv1.Disk{Name: d.Disk, DiskDevice: kubevirtv1.DiskDevice{Disk: target}, Serial: d.Serial}
}

// cdromReadOnly is a CD-ROM's readonly field: set only when the entry asks.
func cdromReadOnly(ro bool) *bool {
	if !ro {
		return nil
	}
	return &ro
}

func volumeEntry(d api.InjectedDisk) kubevirtv1.Volume {
	v := kubevirtv1.Volume{Name: d.Disk}
	if d.Kind == api.KindDataVolume {
		v.DataVolume = &kubevirtv1.DataVolumeSource{Name: d.Name}
		return v
	}
	v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.Name, ReadOnly: d.ReadOnly},
	}
	return v
}

// reconcileList replaces the entries of l this webhook owns with the wanted
// ones in place, drops owned entries no longer wanted, and appends new ones
// in order. Entries it does not own are untouched.
func reconcileList[T any](l []T, name func(T) string, owned sets.Set[string], want map[string]T, order []string) []T {
	out := make([]T, 0, len(l)+len(want))
	placed := sets.New[string]()
	for _, x := range l {
		n := name(x)
		w, wanted := want[n]
		if !owned.Has(n) && !wanted {
			out = append(out, x)
			continue
		}
		if wanted && !placed.Has(n) {
			out = append(out, w)
			placed.Insert(n)
		}
	}
	for _, n := range order {
		if !placed.Has(n) {
			out = append(out, want[n])
		}
	}
	return out
}
