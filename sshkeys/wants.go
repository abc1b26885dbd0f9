package sshkeys

import (
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Wants reports whether vm uses qemuGuestAgent key propagation, and so needs
// its per-VM Secret kept in sync: it is labelled virtstation.io/managed=true,
// its virtstation.io/ssh-user annotation is not empty, and its
// virtstation.io/ssh-propagation annotation is empty or qemuGuestAgent.
func Wants(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Labels[api.LabelManaged] != api.LabelTrue || vm.Annotations[api.AnnotationSSHUser] == "" {
		return false
	}
	switch vm.Annotations[api.AnnotationSSHPropagation] {
	case "", api.PropagationQemuGuestAgent:
		return true
	default:
		return false
	}
}
