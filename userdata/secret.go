package userdata

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
	"github.com/virtstation/virtstation/vmsecret"
)

// DataKey is the Secret key KubeVirt reads user-data from.
const DataKey = "userdata"

// secretSuffix ends the name of every per-VM user-data Secret.
const secretSuffix = "-userdata"

// SecretName is the per-VM Secret holding merged user-data: "<vm>-userdata".
func SecretName(vmName string) string { return vmName + secretSuffix }

// UserDataOf returns the user-data a Secret holds for KubeVirt: the
// "userdata" key, or "userData" as KubeVirt also reads it. found is false
// when the Secret has neither.
func UserDataOf(s *corev1.Secret) (data []byte, found bool) {
	for _, k := range []string{DataKey, "userData"} {
		if v, ok := s.Data[k]; ok {
			return v, true
		}
	}
	return nil, false
}

// Desired is the user-data Secret of vm: the user's own user-data, with any
// Virtstation part it still carries taken out (cloudinit.Split), merged with
// part. It fails when the user's data holds an edited merge, or when the
// result is over api.MaxUserDataBytes.
func Desired(vm *kubevirtv1.VirtualMachine, user []byte, part cloudinit.Part) (*corev1.Secret, error) {
	own, _, err := cloudinit.Split(user)
	if err != nil {
		return nil, fmt.Errorf("the user-data holds Virtstation's merged format but was edited: %w", err)
	}
	merged := own
	if !part.IsZero() {
		rendered, err := part.Render()
		if err != nil {
			return nil, fmt.Errorf("render cloud-config part: %w", err)
		}
		merged = cloudinit.Merge(own, rendered)
	}
	if len(merged) > api.MaxUserDataBytes {
		return nil, fmt.Errorf("the merged user-data is %d bytes, over the %d a Secret holds: shrink your user-data", len(merged), api.MaxUserDataBytes)
	}
	return vmsecret.New(vm, SecretName(vm.Name), map[string][]byte{DataKey: merged}), nil
}
