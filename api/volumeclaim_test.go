package api

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestVolumeClaim(t *testing.T) {
	pvc := func(name string, readOnly bool) *kubevirtv1.PersistentVolumeClaimVolumeSource {
		return &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: readOnly},
		}
	}
	src := field.NewPath("spec", "volumes").Index(2)
	tests := map[string]struct {
		src       kubevirtv1.VolumeSource
		want      ClaimRef
		wantOK    bool
		wantField string
	}{
		"a dataVolume": {
			src:    kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "home"}},
			want:   ClaimRef{Kind: KindDataVolume, Name: "home"},
			wantOK: true, wantField: "spec.volumes[2].dataVolume.name",
		},
		"a hotplugged dataVolume": {
			src:    kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "home", Hotpluggable: true}},
			want:   ClaimRef{Kind: KindDataVolume, Name: "home"},
			wantOK: true, wantField: "spec.volumes[2].dataVolume.name",
		},
		"a persistentVolumeClaim": {
			src:    kubevirtv1.VolumeSource{PersistentVolumeClaim: pvc("scratch", false)},
			want:   ClaimRef{Kind: KindPVC, Name: "scratch"},
			wantOK: true, wantField: "spec.volumes[2].persistentVolumeClaim.claimName",
		},
		"a read-only persistentVolumeClaim": {
			src:    kubevirtv1.VolumeSource{PersistentVolumeClaim: pvc("scratch", true)},
			want:   ClaimRef{Kind: KindPVC, Name: "scratch", ReadOnly: true},
			wantOK: true, wantField: "spec.volumes[2].persistentVolumeClaim.claimName",
		},
		"an empty name is returned as it is": {
			src:    kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{}},
			want:   ClaimRef{Kind: KindDataVolume},
			wantOK: true, wantField: "spec.volumes[2].dataVolume.name",
		},
		"a dataVolume wins over a persistentVolumeClaim": {
			src: kubevirtv1.VolumeSource{
				DataVolume:            &kubevirtv1.DataVolumeSource{Name: "home"},
				PersistentVolumeClaim: pvc("scratch", true),
			},
			want:   ClaimRef{Kind: KindDataVolume, Name: "home"},
			wantOK: true, wantField: "spec.volumes[2].dataVolume.name",
		},
		"a memoryDump names no data disk": {
			src: kubevirtv1.VolumeSource{MemoryDump: &kubevirtv1.MemoryDumpVolumeSource{
				PersistentVolumeClaimVolumeSource: *pvc("dump", false),
			}},
		},
		"an ephemeral volume names no data disk": {
			src: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "base"},
			}},
		},
		"a containerDisk names none": {
			src: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/x"}},
		},
		"an empty source names none": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := VolumeClaim(tc.src)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("VolumeClaim = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
			if !ok {
				return
			}
			if f := got.NameField(src).String(); f != tc.wantField {
				t.Errorf("NameField = %s, want %s", f, tc.wantField)
			}
		})
	}
}
