package sshbridge

import (
	"bytes"
	"context"
	"sync"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/types"
)

// VMRef names the VM a session is for. UID tells a VM from an earlier one of
// the same name: a pin recorded for another UID is stale (the VM was deleted
// and recreated) and trust starts over. An empty UID on either side matches
// any.
type VMRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

// String is namespace/name.
func (v VMRef) String() string { return v.Namespace + "/" + v.Name }

// HostKeyStore keeps the SSH host key trusted for each VM (trust on first
// use). Implementations are safe for concurrent use, also across bridge
// replicas sharing one backend.
type HostKeyStore interface {
	// Get returns the key pinned for vm. found is false when no key is
	// pinned, or the pin belongs to another UID.
	Get(ctx context.Context, vm VMRef) (key ssh.PublicKey, found bool, err error)
	// Pin trusts key for vm if no key is pinned yet (or the pin belongs to
	// another UID). When a key is already pinned, Pin returns nil if it is
	// key and a *HostKeyChangedError if not, so two callers racing to pin
	// different keys agree on the first.
	Pin(ctx context.Context, vm VMRef, key ssh.PublicKey) error
	// ResetHint tells an administrator how to drop vm's pin, for
	// HostKeyChangedError.
	ResetHint(vm VMRef) string
}

// sameVM reports whether a pin recorded for storedUID applies to vm.
func sameVM(storedUID types.UID, vm VMRef) bool {
	return storedUID == "" || vm.UID == "" || storedUID == vm.UID
}

// checkPinned compares a presented key with the pinned one.
func checkPinned(store HostKeyStore, vm VMRef, pinned, presented ssh.PublicKey) error {
	if bytes.Equal(pinned.Marshal(), presented.Marshal()) {
		return nil
	}
	return &HostKeyChangedError{
		VM:        vm,
		Pinned:    ssh.FingerprintSHA256(pinned),
		Presented: ssh.FingerprintSHA256(presented),
		Reset:     store.ResetHint(vm),
	}
}

// hostKeyAlgorithms is the host-key algorithm list to offer. With a pin it
// offers only algorithms that verify with the pinned key, as OpenSSH does
// for known hosts, so a guest that has several host keys is always checked
// against the one pinned rather than whichever a library version prefers.
// Without one it prefers ed25519, as OpenSSH does, and leaves certificates
// out: a certificate is reissued, a pin of it would break.
func hostKeyAlgorithms(pinned ssh.PublicKey) []string {
	if pinned == nil {
		return []string{
			ssh.KeyAlgoED25519,
			ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
			ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
			ssh.KeyAlgoRSA, // SHA-1 signatures, for guests older than OpenSSH 7.2
		}
	}
	if pinned.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{pinned.Type()}
}

// MemoryStore is a HostKeyStore in process memory: for tests and a single
// replica that accepts re-trusting every VM after a restart.
type MemoryStore struct {
	mu   sync.Mutex
	pins map[string]memoryPin
}

type memoryPin struct {
	uid types.UID
	key ssh.PublicKey
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{pins: map[string]memoryPin{}}
}

// Get implements HostKeyStore.
func (m *MemoryStore) Get(_ context.Context, vm VMRef) (ssh.PublicKey, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pins[vm.String()]
	if !ok || !sameVM(p.uid, vm) {
		return nil, false, nil
	}
	return p.key, true, nil
}

// Pin implements HostKeyStore.
func (m *MemoryStore) Pin(_ context.Context, vm VMRef, key ssh.PublicKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pins[vm.String()]; ok && sameVM(p.uid, vm) {
		return checkPinned(m, vm, p.key, key)
	}
	m.pins[vm.String()] = memoryPin{uid: vm.UID, key: key}
	return nil
}

// ResetHint implements HostKeyStore: pins live only in this process.
func (m *MemoryStore) ResetHint(VMRef) string {
	return "pins are kept in the bridge's memory, so restarting the bridge resets them"
}
