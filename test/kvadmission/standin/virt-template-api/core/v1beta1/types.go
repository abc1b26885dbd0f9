// Package v1beta1 is a compile-only stand-in for
// kubevirt.io/virt-template-api/core/v1beta1 (refused by the Go module
// proxy): the one type KubeVirt v1.9.0's informer factory names.
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// VirtualMachineTemplate is an empty stand-in for virt-template's type.
type VirtualMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (t *VirtualMachineTemplate) DeepCopyObject() runtime.Object {
	c := *t
	t.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}
