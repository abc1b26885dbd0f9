package userdata

import (
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Source reports whether the stored vm needs its user-data Secret, and where
// the user's own user-data is. It does when vm is managed, not being
// deleted, and its cloud-init volume reads SecretName(vm.Name), as the
// webhook sets it. The user's part is the virtstation.io/user-data
// annotation; VMs admitted before that annotation existed name their own
// Secret in the record (UserSecret), or kept the user's inline user-data in
// the merged Secret itself, from which Desired splits it out. An
// annotation that does not parse is an error: the Secret cannot be written.
func Source(vm *kubevirtv1.VirtualMachine) (api.UserCloudInit, bool, error) {
	if vm.Labels[api.LabelManaged] != api.LabelTrue || vm.DeletionTimestamp != nil || !ReadsSecret(vm) {
		return api.UserCloudInit{}, false, nil
	}
	if v, ok := vm.Annotations[api.AnnotationUserData]; ok {
		src, err := api.ParseUserCloudInit(v)
		return src, err == nil, err
	}
	rec, err := api.ParseInjected(vm.Annotations[api.AnnotationInjected])
	if err != nil || rec.CloudInit == nil || rec.CloudInit.Secret != SecretName(vm.Name) {
		// The user's own Secret of that name: KubeVirt reads it as it is.
		return api.UserCloudInit{}, false, nil
	}
	if rec.CloudInit.UserSecret != "" {
		return api.UserCloudInit{SecretRef: rec.CloudInit.UserSecret}, true, nil
	}
	return api.UserCloudInit{SecretRef: SecretName(vm.Name)}, true, nil
}

// ReadsSecret reports whether a cloud-init volume of vm's template reads
// its user-data from SecretName(vm.Name).
func ReadsSecret(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.Template == nil {
		return false
	}
	want := SecretName(vm.Name)
	for _, v := range vm.Spec.Template.Spec.Volumes {
		switch {
		case v.CloudInitNoCloud != nil && v.CloudInitNoCloud.UserDataSecretRef != nil:
			if v.CloudInitNoCloud.UserDataSecretRef.Name == want {
				return true
			}
		case v.CloudInitConfigDrive != nil && v.CloudInitConfigDrive.UserDataSecretRef != nil:
			if v.CloudInitConfigDrive.UserDataSecretRef.Name == want {
				return true
			}
		}
	}
	return false
}
