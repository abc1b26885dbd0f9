package sshkeys

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// memo remembers which Warning Events were already emitted, so a reconcile
// that finds the same problem again stays quiet. It is in memory only: a
// restarted reconciler reports each standing problem once more. Safe for
// concurrent use; the zero value is ready.
type memo struct {
	mu sync.Mutex
	// invalid maps a key Secret's UID to the version whose invalid lines
	// were reported.
	invalid map[types.UID]secretVersion
	// taken maps a VM to the conflicting Secret it was warned about.
	taken map[types.NamespacedName]string
}

type secretVersion struct {
	namespace, resourceVersion string
}

// invalidNews reports whether s's invalid lines are news: s was not reported
// at its current resourceVersion. It then remembers s as reported.
func (m *memo) invalidNews(s *corev1.Secret) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.invalid == nil {
		m.invalid = map[types.UID]secretVersion{}
	}
	if m.invalid[s.UID].resourceVersion == s.ResourceVersion {
		return false
	}
	m.invalid[s.UID] = secretVersion{namespace: s.Namespace, resourceVersion: s.ResourceVersion}
	return true
}

// retainInvalid forgets the key Secrets of namespace that are not in keep:
// deleted, unlabelled or fixed ones.
func (m *memo) retainInvalid(namespace string, keep map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, v := range m.invalid {
		if v.namespace == namespace && !keep[uid] {
			delete(m.invalid, uid)
		}
	}
}

// takenNews reports whether the conflict of vm with Secret s is news, and
// remembers it.
func (m *memo) takenNews(vm types.NamespacedName, vmUID types.UID, s *corev1.Secret) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken == nil {
		m.taken = map[types.NamespacedName]string{}
	}
	id := string(vmUID) + "/" + string(s.UID) + "/" + s.ResourceVersion
	if m.taken[vm] == id {
		return false
	}
	m.taken[vm] = id
	return true
}

// forgetTaken drops the conflict remembered for vm.
func (m *memo) forgetTaken(vm types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.taken, vm)
}
