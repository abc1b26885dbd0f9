package lifecycle

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// ClaimPhase reports the phase of the PVC of that name in the VM's
// namespace; found false when there is none.
type ClaimPhase func(name string) (phase corev1.PersistentVolumeClaimPhase, found bool)

// DataLoss says why stopping a VM with this spec would lose data, or "":
//
//   - a writable containerDisk, emptyDisk or ephemeral volume: its writes
//     live in the virt-launcher pod and go with it;
//   - a persistentVolumeClaim or dataVolume whose PVC is not Bound: what
//     the VM wrote may not be on a volume that outlives the pod.
//
// A disk attached as a cdrom or readOnly loses nothing. Volumes KubeVirt
// regenerates at every start (cloud-init, ConfigMaps, Secrets, service
// accounts, downward API) hold no user data.
func DataLoss(spec *kubevirtv1.VirtualMachineInstanceSpec, claim ClaimPhase) string {
	if spec == nil {
		return ""
	}
	readOnly := readOnlyDisks(spec.Domain.Devices.Disks)
	var why []string
	for _, v := range spec.Volumes {
		disk, isClaim := api.VolumeClaim(v.VolumeSource)
		switch {
		case v.ContainerDisk != nil && !readOnly[v.Name]:
			why = append(why, fmt.Sprintf("volume %q is a writable containerDisk", truncate(v.Name, 63)))
		case v.EmptyDisk != nil && !readOnly[v.Name]:
			why = append(why, fmt.Sprintf("volume %q is an emptyDisk", truncate(v.Name, 63)))
		case v.Ephemeral != nil && !readOnly[v.Name]:
			why = append(why, fmt.Sprintf("volume %q is ephemeral", truncate(v.Name, 63)))
		case isClaim:
			why = appendUnbound(why, v.Name, disk.Name, claim)
		}
	}
	if len(why) == 0 {
		return ""
	}
	// The reason goes into an annotation and an Event note: bounded.
	if len(why) > maxReasons {
		why = append(why[:maxReasons], fmt.Sprintf("and %d more", len(why)-maxReasons))
	}
	return strings.Join(why, "; ")
}

// pausedReason is PausedLoss's answer, and how a skip record says the VMI
// was paused.
const pausedReason = "the VMI is paused: a stop drops its memory (unpause it, or stop it yourself)"

// PausedLoss says why stopping vmi would lose data when it is paused
// (virtctl pause): its memory holds what its user left, and a stop drops
// it. "" when it is not paused.
func PausedLoss(vmi *kubevirtv1.VirtualMachineInstance) string {
	if paused(vmi) {
		return pausedReason
	}
	return ""
}

// paused says whether KubeVirt reports vmi paused.
func paused(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstancePaused {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// maxReasons is how many volumes a data-loss reason names.
const maxReasons = 3

func appendUnbound(why []string, volume, claimName string, claim ClaimPhase) []string {
	phase, found := claim(claimName)
	switch {
	case !found:
		return append(why, fmt.Sprintf("volume %q: PVC %q not found", truncate(volume, 63), truncate(claimName, 63)))
	case phase != corev1.ClaimBound:
		return append(why, fmt.Sprintf("volume %q: PVC %q is %s, not Bound", truncate(volume, 63), truncate(claimName, 63), phase))
	}
	return why
}

// readOnlyDisks names the disks attached as a cdrom or read-only.
func readOnlyDisks(disks []kubevirtv1.Disk) map[string]bool {
	ro := map[string]bool{}
	for _, d := range disks {
		switch {
		case d.CDRom != nil:
			ro[d.Name] = true
		case d.Disk != nil && d.Disk.ReadOnly:
			ro[d.Name] = true
		case d.LUN != nil && d.LUN.ReadOnly:
			ro[d.Name] = true
		}
	}
	return ro
}
