package sshkeys

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

func TestSecretName(t *testing.T) {
	if got := SecretName("dev-1"); got != "dev-1-ssh-keys" {
		t.Fatalf("SecretName(dev-1) = %q", got)
	}
}

func testVM(uid types.UID) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev", UID: uid}}
}

func TestDesired(t *testing.T) {
	yes := true
	keys := []string{"ssh-ed25519 AAAA a", "ssh-rsa BBBB"}
	vmRef := metav1.OwnerReference{
		APIVersion:         "kubevirt.io/v1",
		Kind:               "VirtualMachine",
		Name:               "dev",
		UID:                "uid-1",
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
	cases := map[string]struct {
		vm     *kubevirtv1.VirtualMachine
		keys   []string
		owners []metav1.OwnerReference
		data   string
	}{
		"vm with uid is the controller owner": {vm: testVM("uid-1"), keys: keys, owners: []metav1.OwnerReference{vmRef}, data: "ssh-ed25519 AAAA a\nssh-rsa BBBB\n"},
		"vm without uid owns nothing":         {vm: testVM(""), keys: keys, data: "ssh-ed25519 AAAA a\nssh-rsa BBBB\n"},
		"no keys is an empty value":           {vm: testVM("uid-1"), owners: []metav1.OwnerReference{vmRef}, data: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := &corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Namespace:       "ns",
					Name:            "dev-ssh-keys",
					Labels:          map[string]string{api.LabelManagedBy: api.ManagedByValue},
					OwnerReferences: tc.owners,
				},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{DataKey: []byte(tc.data)},
			}
			if got := Desired(tc.vm, tc.keys); !reflect.DeepEqual(got, want) {
				t.Errorf("Desired:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestKeySecretSelector(t *testing.T) {
	if got := KeySecretSelector().String(); got != api.LabelSSHPublicKey+"="+api.LabelTrue {
		t.Fatalf("KeySecretSelector() = %q", got)
	}
}
