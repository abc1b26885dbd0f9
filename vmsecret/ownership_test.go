package vmsecret

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// existing is a Secret named like the per-VM one, with the given labels and
// owner references.
func existing(labels map[string]string, owners ...metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "dev-ssh-keys", ResourceVersion: "7",
		Labels: labels, OwnerReferences: owners,
	}}
}

func ownerRef(apiVersion, kind, name string, uid types.UID, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &controller}
}

var managedBy = map[string]string{api.LabelManagedBy: api.ManagedByValue}

func TestClassify(t *testing.T) {
	vm := testVM("uid-1")
	cases := map[string]struct {
		secret *corev1.Secret
		want   Ownership
		why    string
	}{
		"controlled by the vm":             {secret: existing(managedBy, ownerRef("kubevirt.io/v1", "VirtualMachine", "dev", "uid-1", true)), want: Ours},
		"created by the webhook, no owner": {secret: existing(managedBy), want: Adoptable},
		"non-controller owner only": {
			secret: existing(managedBy, ownerRef("v1", "ConfigMap", "x", "uid-9", false)), want: Adoptable},
		"an earlier vm of the same name": {
			secret: existing(managedBy, ownerRef("kubevirt.io/v1", "VirtualMachine", "dev", "uid-0", true)), want: PreviousVM},
		"controlled by something else": {
			secret: existing(managedBy, ownerRef("apps/v1", "Deployment", "web", "uid-2", true)), want: Foreign,
			why: "it is controlled by Deployment web"},
		"not labelled managed-by": {
			secret: existing(nil), want: Foreign,
			why: "it lacks the label " + api.LabelManagedBy + "=" + api.ManagedByValue},
		"labelled by someone else": {
			secret: existing(map[string]string{api.LabelManagedBy: "helm"}, ownerRef("kubevirt.io/v1", "VirtualMachine", "dev", "uid-1", true)), want: Foreign,
			why: "it lacks the label " + api.LabelManagedBy + "=" + api.ManagedByValue},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, why := Classify(tc.secret, vm)
			if got != tc.want || why != tc.why {
				t.Errorf("Classify = %v %q, want %v %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	vm := testVM("uid-1")
	data := map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAA a\n")}
	desired := New(vm, "dev-ssh-keys", data)
	ref := desired.OwnerReferences[0]

	withData := func(s *corev1.Secret, d map[string][]byte) *corev1.Secret { s.Data = d; return s }
	cases := map[string]struct {
		cur     *corev1.Secret
		want    *corev1.Secret
		changed bool
	}{
		"in sync": {
			cur:  withData(existing(managedBy, ref), data),
			want: withData(existing(managedBy, ref), data),
		},
		"other labels, annotations and owners are kept": {
			cur: func() *corev1.Secret {
				s := withData(existing(map[string]string{api.LabelManagedBy: api.ManagedByValue, "team": "a"}, ownerRef("v1", "ConfigMap", "x", "uid-9", false), ref), data)
				s.Annotations = map[string]string{"note": "x"}
				return s
			}(),
			want: func() *corev1.Secret {
				s := withData(existing(map[string]string{api.LabelManagedBy: api.ManagedByValue, "team": "a"}, ownerRef("v1", "ConfigMap", "x", "uid-9", false), ref), data)
				s.Annotations = map[string]string{"note": "x"}
				return s
			}(),
		},
		"adopting the webhook's empty secret": {
			cur:     withData(existing(managedBy), map[string][]byte{"authorized_keys": {}}),
			want:    withData(existing(managedBy, ref), data),
			changed: true,
		},
		"adopting a secret without data": {
			cur:     existing(managedBy),
			want:    withData(existing(managedBy, ref), data),
			changed: true,
		},
		"rotated keys": {
			cur:     withData(existing(managedBy, ref), map[string][]byte{"authorized_keys": []byte("ssh-rsa OLD\n")}),
			want:    withData(existing(managedBy, ref), data),
			changed: true,
		},
		"extra data keys are dropped": {
			cur:     withData(existing(managedBy, ref), map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAA a\n"), "stray": []byte("ssh-rsa X")}),
			want:    withData(existing(managedBy, ref), data),
			changed: true,
		},
		"a non-controller reference to the vm becomes the controller one": {
			cur:     withData(existing(managedBy, ownerRef("kubevirt.io/v1", "VirtualMachine", "dev", "uid-1", false)), data),
			want:    withData(existing(managedBy, ref), data),
			changed: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			got, changed := Update(tc.cur, desired)
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("update:\n got %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.cur, before) {
				t.Error("update modified its input")
			}
		})
	}
}

func testVM(uid types.UID) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{}
	vm.Namespace, vm.Name, vm.UID = "ns", "dev", uid
	return vm
}
