package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestDataLoss(t *testing.T) {
	claims := map[string]corev1.PersistentVolumeClaimPhase{"home": corev1.ClaimBound, "scratch": corev1.ClaimPending}
	phase := func(name string) (corev1.PersistentVolumeClaimPhase, bool) { p, ok := claims[name]; return p, ok }
	disk := func(name string) kubevirtv1.Disk {
		return kubevirtv1.Disk{Name: name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}}
	}
	tests := []struct {
		name    string
		disks   []kubevirtv1.Disk
		volumes []kubevirtv1.Volume
		want    string // a fragment; "" means safe
	}{
		{"bound PVC and cloud-init are safe", []kubevirtv1.Disk{disk("root")}, []kubevirtv1.Volume{
			{Name: "root", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home"}}}},
			{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
		}, ""},
		{"writable containerDisk loses data", []kubevirtv1.Disk{disk("root")}, []kubevirtv1.Volume{
			{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}},
		}, `volume "root" is a writable containerDisk`},
		{"containerDisk as a cdrom is safe", []kubevirtv1.Disk{{Name: "iso", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{}}}}, []kubevirtv1.Volume{
			{Name: "iso", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}},
		}, ""},
		{"emptyDisk loses data", []kubevirtv1.Disk{disk("tmp")}, []kubevirtv1.Volume{
			{Name: "tmp", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{}}},
		}, `volume "tmp" is an emptyDisk`},
		{"ephemeral loses data", []kubevirtv1.Disk{disk("eph")}, []kubevirtv1.Volume{
			{Name: "eph", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{}}},
		}, `volume "eph" is ephemeral`},
		{"pending PVC", []kubevirtv1.Disk{disk("data")}, []kubevirtv1.Volume{
			{Name: "data", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "scratch"}}},
		}, `PVC "scratch" is Pending, not Bound`},
		{"missing PVC", []kubevirtv1.Disk{disk("data")}, []kubevirtv1.Volume{
			{Name: "data", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "gone"}}},
		}, `PVC "gone" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &kubevirtv1.VirtualMachineInstanceSpec{Volumes: tt.volumes}
			spec.Domain.Devices.Disks = tt.disks
			got := DataLoss(spec, phase)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("DataLoss = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPausedLoss(t *testing.T) {
	paused := func(status corev1.ConditionStatus) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Conditions: []kubevirtv1.VirtualMachineInstanceCondition{
			{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue},
			{Type: kubevirtv1.VirtualMachineInstancePaused, Status: status},
		}}}
	}
	if got := PausedLoss(paused(corev1.ConditionTrue)); !strings.Contains(got, "paused") {
		t.Errorf("PausedLoss(paused) = %q, want a reason", got)
	}
	if got := PausedLoss(paused(corev1.ConditionFalse)); got != "" {
		t.Errorf("PausedLoss(unpaused) = %q, want none", got)
	}
	if got := PausedLoss(&kubevirtv1.VirtualMachineInstance{}); got != "" {
		t.Errorf("PausedLoss(no conditions) = %q, want none", got)
	}
}
