package sshkeys

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/vmsecret"
)

// DataKey is the key holding the keys in the per-VM Secret.
const DataKey = "authorized_keys"

// secretSuffix ends the name of every per-VM Secret.
const secretSuffix = "-ssh-keys"

// SecretName is the per-VM Secret KubeVirt's qemuGuestAgent propagation
// reads: "<vm>-ssh-keys".
func SecretName(vmName string) string {
	return vmName + secretSuffix
}

// KeySecretSelector selects the Secrets that hold SSH public keys
// (virtstation.io/ssh-public-key=true). A cache restricted to it holds every
// Secret Collect reads and no other.
func KeySecretSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{api.LabelSSHPublicKey: api.LabelTrue})
}

// Render is the Secret content for a set of keys: one key a line, with a
// trailing newline; empty (not nil) for no keys.
func Render(keys []string) []byte {
	if len(keys) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(keys, "\n") + "\n")
}

// Desired returns the per-VM Secret for vm holding keys: in the VM's
// namespace, named SecretName(vm.Name), labelled
// app.kubernetes.io/managed-by=virtstation, with data[DataKey] = Render(keys).
// When the VM has a UID the VM is its controller owner (blockOwnerDeletion
// set), so the Secret is garbage-collected with the VM; without one (a VM
// not yet created) there is no owner reference.
func Desired(vm *kubevirtv1.VirtualMachine, keys []string) *corev1.Secret {
	return vmsecret.New(vm, SecretName(vm.Name), map[string][]byte{DataKey: Render(keys)})
}
