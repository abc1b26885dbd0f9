package sshbridge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConfigMapStore holds the ConfigMapStore to the HostKeyStore contract
// against a real API server, and checks what an administrator sees.
func TestConfigMapStore(t *testing.T) {
	cs := newClientset(t)
	ns := bridgeNamespace(t, cs, "virtstation-pins")
	store := NewConfigMapStore(cs, ns)
	testStoreSemantics(t, store, "configmap")

	// What an administrator finds: one labelled ConfigMap per VM, and a
	// reset command that deletes it.
	ctx := context.Background()
	vm := VMRef{Namespace: "team-a", Name: "configmap", UID: "uid-2"}
	key, found, err := store.Get(ctx, vm)
	if err != nil || !found {
		t.Fatalf("Get: %v, %t", err, found)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=virtstation-bridge,virtstation.io/vm-namespace=team-a,virtstation.io/vm-name=configmap"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("listing the VM's pin by label: %v, %d items", err, len(list.Items))
	}
	cm := list.Items[0]
	want := map[string]string{
		"namespace":   "team-a",
		"name":        "configmap",
		"uid":         "uid-2",
		"knownHosts":  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))),
		"fingerprint": ssh.FingerprintSHA256(key),
	}
	if fmt.Sprint(cm.Data) != fmt.Sprint(want) || cm.Name != ConfigMapName(vm) {
		t.Fatalf("configmap %s data = %v, want %s with %v", cm.Name, cm.Data, ConfigMapName(vm), want)
	}
	if hint := store.ResetHint(vm); hint != "kubectl -n virtstation-pins delete configmap "+cm.Name {
		t.Fatalf("ResetHint = %q", hint)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, found, err := store.Get(ctx, vm); err != nil || found {
		t.Fatalf("after the reset, Get = %t, %v; want no pin", found, err)
	}
}

// TestConfigMapStoreConcurrentPins: replicas racing to pin different keys
// for one VM agree on a single winner, for a new VM and for a recreated one
// whose stale pin they replace.
func TestConfigMapStoreConcurrentPins(t *testing.T) {
	ns := bridgeNamespace(t, newClientset(t), "virtstation-race")
	replicas := []*ConfigMapStore{NewConfigMapStore(newClientset(t), ns), NewConfigMapStore(newClientset(t), ns)}
	ctx := context.Background()
	const racers = 8
	keys := make([]ssh.PublicKey, racers)
	for i := range keys {
		keys[i] = newHostKey(t)
	}

	race := func(vm VMRef) {
		t.Helper()
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { errs[i] = replicas[i%len(replicas)].Pin(ctx, vm, keys[i]) })
		}
		wg.Wait()
		winner, found, err := replicas[0].Get(ctx, vm)
		if err != nil || !found {
			t.Fatalf("Get after the race: %v, %t", err, found)
		}
		wins := 0
		for i, err := range errs {
			var changed *HostKeyChangedError
			switch {
			case err == nil:
				wins++
				if !sameKey(keys[i], winner) {
					t.Fatalf("racer %d was told its key is pinned, but %s is", i, ssh.FingerprintSHA256(winner))
				}
			case errors.As(err, &changed):
				if changed.Pinned != ssh.FingerprintSHA256(winner) {
					t.Fatalf("racer %d was told %s is pinned, but %s is", i, changed.Pinned, ssh.FingerprintSHA256(winner))
				}
			default:
				t.Fatalf("racer %d: %v", i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d racers won, want 1", wins)
		}
	}
	vm := VMRef{Namespace: "team-a", Name: "contested", UID: "uid-1"}
	race(vm)
	vm.UID = "uid-2" // deleted and recreated: every replica sees a stale pin
	race(vm)
}

// TestConfigMapStoreRefusesForeignAndDamagedPins: a ConfigMap the bridge did
// not write is never trusted or overwritten, and a damaged pin fails closed
// with the way out.
func TestConfigMapStoreRefusesForeignAndDamagedPins(t *testing.T) {
	cs := newClientset(t)
	ns := bridgeNamespace(t, cs, "virtstation-foreign")
	store := NewConfigMapStore(cs, ns)
	ctx := context.Background()
	key := newHostKey(t)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))

	tests := map[string]struct {
		vm      VMRef
		cm      func(name string) *corev1.ConfigMap
		wantErr string
	}{
		"not managed by the bridge": {
			vm: VMRef{Namespace: "team-a", Name: "foreign"},
			cm: func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"namespace": "team-a", "name": "foreign", "knownHosts": line}}
			},
			wantErr: "configmap virtstation-foreign/vs-hostkey-[0-9a-f]{20} exists but is not labelled app.kubernetes.io/managed-by=virtstation-bridge; the bridge will not use it as the host key pin of VM team-a/foreign",
		},
		"damaged key": {
			vm: VMRef{Namespace: "team-a", Name: "damaged"},
			cm: func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedBy}}, Data: map[string]string{"namespace": "team-a", "name": "damaged", "knownHosts": "ssh-ed25519 AAAA"}}
			},
			wantErr: "the host key pin of VM team-a/damaged \\(configmap virtstation-foreign/vs-hostkey-[0-9a-f]{20}, data knownHosts\\) is not one authorized_keys line; reset it with: kubectl -n virtstation-foreign delete configmap vs-hostkey-[0-9a-f]{20}",
		},
		"pins another VM": {
			vm: VMRef{Namespace: "team-a", Name: "collision"},
			cm: func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedBy}}, Data: map[string]string{"namespace": "team-z", "name": "other", "knownHosts": line}}
			},
			wantErr: "configmap virtstation-foreign/vs-hostkey-[0-9a-f]{20} pins VM team-z/other, not team-a/collision",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cm := tc.cm(ConfigMapName(tc.vm))
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile("^" + tc.wantErr + "$")
			if _, _, err := store.Get(ctx, tc.vm); err == nil || !re.MatchString(err.Error()) {
				t.Fatalf("Get error = %v, want %s", err, tc.wantErr)
			}
			if err := store.Pin(ctx, tc.vm, newHostKey(t)); err == nil || !re.MatchString(err.Error()) {
				t.Fatalf("Pin error = %v, want %s", err, tc.wantErr)
			}
			got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil || fmt.Sprint(got.Data) != fmt.Sprint(cm.Data) {
				t.Fatalf("the ConfigMap was changed: %v, %v", got.Data, err)
			}
		})
	}
}

func TestConfigMapNameAndLabels(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := map[string]struct {
		vm         VMRef
		wantLabels map[string]string
	}{
		"short name": {
			vm:         VMRef{Namespace: "team-a", Name: "ws-1"},
			wantLabels: map[string]string{ManagedByLabel: ManagedBy, VMNamespaceLabel: "team-a", VMNameLabel: "ws-1"},
		},
		"name too long for a label": {
			vm:         VMRef{Namespace: "team-a", Name: long},
			wantLabels: map[string]string{ManagedByLabel: ManagedBy, VMNamespaceLabel: "team-a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cm := pinConfigMap("bridge", tc.vm, newHostKey(t))
			if !regexp.MustCompile(`^vs-hostkey-[0-9a-f]{20}$`).MatchString(cm.Name) || cm.Name != ConfigMapName(tc.vm) {
				t.Fatalf("name %q", cm.Name)
			}
			if fmt.Sprint(cm.Labels) != fmt.Sprint(tc.wantLabels) {
				t.Fatalf("labels %v, want %v", cm.Labels, tc.wantLabels)
			}
		})
	}
}
