package api

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// ClaimRef is the DataVolume or PVC a KubeVirt volume's source names: the
// object that is the volume's disk.
type ClaimRef struct {
	// Kind is KindDataVolume or KindPVC.
	Kind string
	// Name is the object's name in the VM's namespace, as the source spells
	// it: "" when the source names none, which the caller decides about.
	Name string
	// ReadOnly is the persistentVolumeClaim's readOnly; a dataVolume source
	// has none.
	ReadOnly bool
}

// VolumeClaim answers which object is the disk of a volume with source src:
// its dataVolume, else its persistentVolumeClaim. ok is false when src names
// neither; a volume of any other kind (containerDisk, emptyDisk, ephemeral,
// memoryDump, ...) has no data disk. A dataVolume wins over a
// persistentVolumeClaim in the same source, as in KubeVirt's
// PVCNameFromVirtVolume (pkg/storage/types/pvc.go); KubeVirt's admission
// refuses such a source ("must have exactly one source type set").
func VolumeClaim(src kubevirtv1.VolumeSource) (ref ClaimRef, ok bool) {
	switch {
	case src.DataVolume != nil:
		return ClaimRef{Kind: KindDataVolume, Name: src.DataVolume.Name}, true
	case src.PersistentVolumeClaim != nil:
		return ClaimRef{Kind: KindPVC, Name: src.PersistentVolumeClaim.ClaimName, ReadOnly: src.PersistentVolumeClaim.ReadOnly}, true
	}
	return ClaimRef{}, false
}

// NameField is the path of the field that names the object, under the
// path of the volume source: source.dataVolume.name or
// source.persistentVolumeClaim.claimName.
func (r ClaimRef) NameField(source *field.Path) *field.Path {
	if r.Kind == KindDataVolume {
		return source.Child("dataVolume", "name")
	}
	return source.Child("persistentVolumeClaim", "claimName")
}
