package mutate

import (
	"strings"

	"github.com/virtstation/virtstation/api"
)

// A VM without the virtstation.io/managed label reaches the webhook only on
// the UPDATE that removes it (the objectSelector matches the old object).
// Such a VM is released: Virtstation lets go of it. Every step then undoes
// what the previous record says it injected, as it does when its own
// annotation is removed, and injects nothing new; the record itself goes.
// The user's virtstation.io/ annotations, if still there, are ignored, never
// denied. Two things stay:
//
//   - the MAC on the pod-network interface (and the default interface it was
//     pinned on): the guest's network identity, DHCP leases and licences
//     must not change because the VM is no longer managed, and KubeVirt
//     without a MAC gives the guest a new one on every start (kubemacpool,
//     likewise, never takes a MAC back from a VM);
//   - a change of data disks still needs a stopped VM whose VMI is gone.

// release marks m released and presents the steps with the VM as if it
// had no virtstation.io/ annotations but the record: each step then takes
// the path that undoes what it injected. m.vm keeps the annotations the
// user left; they are the user's fields.
func release(m *mutation) {
	m.released = true
	vm := m.in.VM.DeepCopy()
	for k := range vm.Annotations {
		if strings.HasPrefix(k, annotationPrefix) && k != api.AnnotationInjected {
			delete(vm.Annotations, k)
		}
	}
	m.in.VM = vm
}
