package validate

import (
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// claimSource is the part of a volume source (a VM's volume, or an
// add-volume request's volumeSource) that names a disk. Only these fields
// are decoded, so an unrelated field the Go types would refuse cannot make
// the decode fail.
type claimSource struct {
	DataVolume *struct {
		Name string `json:"name"`
	} `json:"dataVolume"`
	PersistentVolumeClaim *struct {
		ClaimName string `json:"claimName"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"persistentVolumeClaim"`
}

// claim is which DataVolume or PVC the source names (api.VolumeClaim).
func (s *claimSource) claim() (api.ClaimRef, bool) {
	var src kubevirtv1.VolumeSource
	if dv := s.DataVolume; dv != nil {
		src.DataVolume = &kubevirtv1.DataVolumeSource{Name: dv.Name}
	}
	if pvc := s.PersistentVolumeClaim; pvc != nil {
		src.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.ClaimName, ReadOnly: pvc.ReadOnly},
		}
	}
	return api.VolumeClaim(src)
}
