package sshbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// Labels and data keys of a pin ConfigMap.
const (
	// ManagedByLabel marks every pin ConfigMap, with value ManagedBy; the
	// store never reads or writes a ConfigMap without it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "virtstation-bridge"
	// VMNamespaceLabel and VMNameLabel name the pinned VM, so an
	// administrator can select its pin. VMNameLabel is left out when the
	// name is too long for a label value (over 63 characters).
	VMNamespaceLabel = "virtstation.io/vm-namespace"
	VMNameLabel      = "virtstation.io/vm-name"

	dataNamespace   = "namespace"
	dataName        = "name"
	dataUID         = "uid"
	dataKnownHosts  = "knownHosts"  // the key, one authorized_keys-format line
	dataFingerprint = "fingerprint" // SHA256:..., for people reading the object

	configMapPrefix = "vs-hostkey-"
	// pinAttempts bounds the create/read/update loop of Pin against other
	// replicas writing the same ConfigMap.
	pinAttempts = 5
)

// ConfigMapStore is a HostKeyStore that keeps one ConfigMap per VM in the
// bridge's own namespace, so every replica sees the same pins and they
// survive restarts. See ConfigMapName for the layout.
//
// The bridge needs get, create and update on configmaps in that namespace.
type ConfigMapStore struct {
	client    kubernetes.Interface
	namespace string
}

// NewConfigMapStore returns a store writing to namespace (the bridge's).
func NewConfigMapStore(client kubernetes.Interface, namespace string) *ConfigMapStore {
	return &ConfigMapStore{client: client, namespace: namespace}
}

// ConfigMapName is the name of vm's pin: "vs-hostkey-" and the first 20 hex
// digits of SHA-256("<namespace>/<name>"). VM names run to 253 characters,
// so they cannot be part of the name; the ConfigMap's data and labels say
// which VM it pins:
//
//	metadata.labels:  app.kubernetes.io/managed-by=virtstation-bridge,
//	                  virtstation.io/vm-namespace=<ns>, virtstation.io/vm-name=<name>
//	data.namespace, data.name, data.uid:  the VM
//	data.knownHosts:  the host key, as an authorized_keys line ("ssh-ed25519 AAAA...")
//	data.fingerprint: its SHA256 fingerprint
func ConfigMapName(vm VMRef) string {
	sum := sha256.Sum256([]byte(vm.Namespace + "/" + vm.Name))
	return configMapPrefix + hex.EncodeToString(sum[:])[:20]
}

// Get implements HostKeyStore.
func (s *ConfigMapStore) Get(ctx context.Context, vm VMRef) (ssh.PublicKey, bool, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, ConfigMapName(vm), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the host key pin of VM %s: %w", vm, err)
	}
	uid, err := pinOwner(cm, vm)
	if err != nil {
		return nil, false, err
	}
	if !sameVM(uid, vm) {
		return nil, false, nil
	}
	key, err := s.pinKey(cm, vm)
	if err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// Pin implements HostKeyStore: create if absent; when present, compare, or
// replace a pin left by an earlier VM of the same name. Updates carry the
// resourceVersion read, so a replica never overwrites a pin another just
// wrote without comparing against it.
func (s *ConfigMapStore) Pin(ctx context.Context, vm VMRef, key ssh.PublicKey) error {
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	want := pinConfigMap(s.namespace, vm, key)
	for range pinAttempts {
		_, err := cms.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("pin the host key of VM %s: %w", vm, err)
		}
		cur, err := cms.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // deleted in between: create again
		}
		if err != nil {
			return fmt.Errorf("read the host key pin of VM %s: %w", vm, err)
		}
		uid, err := pinOwner(cur, vm)
		if err != nil {
			return err
		}
		if sameVM(uid, vm) {
			pinned, err := s.pinKey(cur, vm)
			if err != nil {
				return err
			}
			return checkPinned(s, vm, pinned, key)
		}
		// The pin is an earlier VM's: trust starts over.
		repl := want.DeepCopy()
		repl.ResourceVersion = cur.ResourceVersion
		_, err = cms.Update(ctx, repl, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replace the stale host key pin of VM %s: %w", vm, err)
		}
	}
	return fmt.Errorf("pin the host key of VM %s: still conflicting with other writers after %d attempts", vm, pinAttempts)
}

// ResetHint implements HostKeyStore.
func (s *ConfigMapStore) ResetHint(vm VMRef) string {
	return fmt.Sprintf("kubectl -n %s delete configmap %s", s.namespace, ConfigMapName(vm))
}

// pinConfigMap is the ConfigMap that pins key for vm.
func pinConfigMap(namespace string, vm VMRef, key ssh.PublicKey) *corev1.ConfigMap {
	labels := map[string]string{ManagedByLabel: ManagedBy}
	for label, value := range map[string]string{VMNamespaceLabel: vm.Namespace, VMNameLabel: vm.Name} {
		if len(validation.IsValidLabelValue(value)) == 0 {
			labels[label] = value
		}
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(vm), Namespace: namespace, Labels: labels},
		Data: map[string]string{
			dataNamespace:   vm.Namespace,
			dataName:        vm.Name,
			dataUID:         string(vm.UID),
			dataKnownHosts:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))),
			dataFingerprint: ssh.FingerprintSHA256(key),
		},
	}
}

// pinOwner checks that cm is a pin of vm's name and returns the UID it was
// recorded for. A ConfigMap of that name that the bridge does not manage, or
// that pins another VM (a hash collision), is an error: the store neither
// trusts nor overwrites it.
func pinOwner(cm *corev1.ConfigMap, vm VMRef) (types.UID, error) {
	if cm.Labels[ManagedByLabel] != ManagedBy {
		return "", fmt.Errorf("configmap %s/%s exists but is not labelled %s=%s; the bridge will not use it as the host key pin of VM %s",
			cm.Namespace, cm.Name, ManagedByLabel, ManagedBy, vm)
	}
	if cm.Data[dataNamespace] != vm.Namespace || cm.Data[dataName] != vm.Name {
		return "", fmt.Errorf("configmap %s/%s pins VM %s/%s, not %s", cm.Namespace, cm.Name, cm.Data[dataNamespace], cm.Data[dataName], vm)
	}
	return types.UID(cm.Data[dataUID]), nil
}

// pinKey parses the pinned key. A damaged pin fails closed.
func (s *ConfigMapStore) pinKey(cm *corev1.ConfigMap, vm VMRef) (ssh.PublicKey, error) {
	key, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(cm.Data[dataKnownHosts]))
	if err != nil || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("the host key pin of VM %s (configmap %s/%s, data %s) is not one authorized_keys line; reset it with: %s",
			vm, cm.Namespace, cm.Name, dataKnownHosts, s.ResetHint(vm))
	}
	return key, nil
}

// PinSelector selects every pin ConfigMap.
const PinSelector = ManagedByLabel + "=" + ManagedBy

// PinnedVM is the VM a pin ConfigMap was recorded for; ok is false when cm
// is not a pin.
func PinnedVM(cm *corev1.ConfigMap) (vm VMRef, ok bool) {
	if cm.Labels[ManagedByLabel] != ManagedBy || !strings.HasPrefix(cm.Name, configMapPrefix) {
		return VMRef{}, false
	}
	vm = VMRef{Namespace: cm.Data[dataNamespace], Name: cm.Data[dataName], UID: types.UID(cm.Data[dataUID])}
	return vm, vm.Namespace != "" && vm.Name != ""
}
