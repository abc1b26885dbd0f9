package secretgc

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestRefersToSecret(t *testing.T) {
	ref := &corev1.LocalObjectReference{Name: "dev-userdata"}
	other := &corev1.LocalObjectReference{Name: "someone-elses"}
	vmWith := func(vols ...kubevirtv1.Volume) *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: vols},
		}}}
	}
	for name, tc := range map[string]struct {
		vm   *kubevirtv1.VirtualMachine
		want bool
	}{
		"no template": {vm: &kubevirtv1.VirtualMachine{}},
		"inline user data": {vm: vmWith(kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}})},
		"noCloud from its Secret": {vm: vmWith(kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: ref}}}), want: true},
		"configDrive from its Secret": {vm: vmWith(kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserDataSecretRef: ref}}}), want: true},
		"the user's own Secret": {vm: vmWith(kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
			CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: other}}})},
	} {
		t.Run(name, func(t *testing.T) {
			if got := refersToSecret(tc.vm, "dev-userdata"); got != tc.want {
				t.Errorf("refersToSecret = %v, want %v", got, tc.want)
			}
		})
	}
}
