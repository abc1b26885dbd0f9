package claims

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// Attaches reports whether vm attaches the data disk named disk (a
// DataVolume or PVC in vm's namespace): its virtstation.io/injected record
// lists the disk among its dataDisks, a volume of its template refers to
// it, or one of its dataVolumeTemplates creates it. A record that does not parse counts as attaching every disk, so that
// an unreadable record never releases a claim.
func Attaches(vm *kubevirtv1.VirtualMachine, disk string) bool {
	if rec, ok := vm.Annotations[api.AnnotationInjected]; ok {
		in, err := api.ParseInjected(rec)
		if err != nil {
			return true
		}
		for _, d := range in.DataDisks {
			if d.Name == disk {
				return true
			}
		}
	}
	for _, t := range vm.Spec.DataVolumeTemplates {
		if t.Name == disk {
			return true
		}
	}
	return vm.Spec.Template != nil && volumesUse(vm.Spec.Template.Spec.Volumes, disk)
}

// UsesDisk reports whether vmi uses the DataVolume or PVC named disk: it
// has not finished (phase Succeeded or Failed) and has a volume backed by
// the disk (persistentVolumeClaim.claimName or dataVolume.name).
func UsesDisk(vmi *kubevirtv1.VirtualMachineInstance, disk string) bool {
	return !vmi.IsFinal() && volumesUse(vmi.Spec.Volumes, disk)
}

// diskNames returns the names of the DataVolumes and PVCs that volumes
// refer to. A DataVolume's PVC has the DataVolume's name, so one name covers
// both.
func diskNames(volumes []kubevirtv1.Volume) []string {
	var out []string
	for _, v := range volumes {
		if c, ok := api.VolumeClaim(v.VolumeSource); ok && c.Name != "" {
			out = append(out, c.Name)
		}
	}
	return out
}

func volumesUse(volumes []kubevirtv1.Volume, disk string) bool {
	for _, name := range diskNames(volumes) {
		if name == disk {
			return true
		}
	}
	return false
}

// kindOf names the kind of a disk object.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *cdiv1beta1.DataVolume:
		return api.KindDataVolume
	case *corev1.PersistentVolumeClaim:
		return api.KindPVC
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}
