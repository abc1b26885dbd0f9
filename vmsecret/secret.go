package vmsecret

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// New returns the per-VM Secret name holding data: in the VM's namespace,
// labelled app.kubernetes.io/managed-by=virtstation. When the VM has a UID
// the VM is its controller owner (blockOwnerDeletion set), so the Secret is
// garbage-collected with the VM; without one (a VM not yet stored, as render
// sees it) there is no owner reference.
func New(vm *kubevirtv1.VirtualMachine, name string, data map[string][]byte) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vm.Namespace,
			Name:      name,
			Labels:    map[string]string{api.LabelManagedBy: api.ManagedByValue},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	if vm.UID != "" {
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)}
	}
	return s
}
