package vmsecret

import (
	"bytes"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Ownership is how an existing per-VM Secret relates to vm.
type Ownership int

const (
	// Ours: vm is the Secret's controller.
	Ours Ownership = iota
	// Adoptable: labelled managed-by virtstation and without a controller,
	// as earlier versions of the webhook created it at admission.
	Adoptable
	// PreviousVM: controlled by an earlier VM of the same name, which
	// garbage collection has yet to catch up with.
	PreviousVM
	// Foreign: anything else; never touched.
	Foreign
)

// Classify says whose s is, and for a foreign Secret why it is not ours.
func Classify(s *corev1.Secret, vm *kubevirtv1.VirtualMachine) (Ownership, string) {
	owner := metav1.GetControllerOfNoCopy(s)
	switch {
	case s.Labels[api.LabelManagedBy] != api.ManagedByValue:
		return Foreign, fmt.Sprintf("it lacks the label %s=%s", api.LabelManagedBy, api.ManagedByValue)
	case owner == nil:
		return Adoptable, ""
	case owner.UID == vm.UID:
		return Ours, ""
	case isVMRef(owner) && owner.Name == vm.Name:
		return PreviousVM, ""
	default:
		return Foreign, fmt.Sprintf("it is controlled by %s %s", owner.Kind, owner.Name)
	}
}

// isVMRef reports whether ref points at a KubeVirt VirtualMachine.
func isVMRef(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == kubevirtv1.VirtualMachineGroupVersionKind.Group && ref.Kind == kubevirtv1.VirtualMachineGroupVersionKind.Kind
}

// Update returns a copy of cur changed to match desired (data, desired's
// labels, desired's controller reference) and whether anything changed. cur
// keeps its other labels, annotations and owner references, its type and its
// resourceVersion, so writing the copy is an optimistic-concurrency update.
func Update(cur, desired *corev1.Secret) (*corev1.Secret, bool) {
	next := cur.DeepCopy()
	changed := false
	if !equalData(next.Data, desired.Data) {
		next.Data = desired.Data
		changed = true
	}
	for k, v := range desired.Labels {
		if next.Labels[k] != v {
			if next.Labels == nil {
				next.Labels = map[string]string{}
			}
			next.Labels[k] = v
			changed = true
		}
	}
	for _, want := range desired.OwnerReferences {
		if setOwnerRef(next, want) {
			changed = true
		}
	}
	return next, changed
}

// setOwnerRef makes s carry want (matched by UID) and reports whether it had
// to change anything.
func setOwnerRef(s *corev1.Secret, want metav1.OwnerReference) bool {
	for i, have := range s.OwnerReferences {
		if have.UID != want.UID {
			continue
		}
		if equalRef(have, want) {
			return false
		}
		s.OwnerReferences[i] = want
		return true
	}
	s.OwnerReferences = append(s.OwnerReferences, want)
	return true
}

func equalRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		boolValue(a.Controller) == boolValue(b.Controller) && boolValue(a.BlockOwnerDeletion) == boolValue(b.BlockOwnerDeletion)
}

func boolValue(p *bool) bool { return p != nil && *p }

// equalData compares Secret data; a missing value and an empty one differ,
// since KubeVirt reads the data key.
func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !bytes.Equal(av, bv) {
			return false
		}
	}
	return true
}
