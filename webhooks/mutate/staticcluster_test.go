package mutate

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/mac"
)

// TestSetVM: adding VMs one by one with SetVM indexes them as
// NewStaticCluster does, and replacing a VM drops the MACs it no longer has.
func TestSetVM(t *testing.T) {
	const shared, other = "02:00:00:00:00:01", "02:00:00:00:00:02"
	cases := map[string]struct {
		set  []kubevirtv1.VirtualMachine
		want map[string][]types.NamespacedName
	}{
		"owners sorted whatever the order": {
			set: []kubevirtv1.VirtualMachine{otherVM("b", "vm", shared), otherVM("a", "vm", shared), otherVM("a", "z", other)},
			want: map[string][]types.NamespacedName{
				shared: {{Namespace: "a", Name: "vm"}, {Namespace: "b", Name: "vm"}},
				other:  {{Namespace: "a", Name: "z"}},
			},
		},
		"a replaced VM leaves its old MAC": {
			set:  []kubevirtv1.VirtualMachine{otherVM("a", "vm", shared), otherVM("a", "vm", other)},
			want: map[string][]types.NamespacedName{shared: nil, other: {{Namespace: "a", Name: "vm"}}},
		},
		"a VM without a MAC": {
			set:  []kubevirtv1.VirtualMachine{otherVM("a", "vm", shared), otherVM("a", "vm", "")},
			want: map[string][]types.NamespacedName{shared: nil},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := NewStaticCluster(nil)
			for i := range tc.set {
				c.SetVM(&tc.set[i])
			}
			for addr, want := range tc.want {
				hw, err := mac.Parse(addr)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := c.MACOwners(context.Background(), hw)
				if !slices.Equal(got, want) {
					t.Errorf("MACOwners(%s) = %v, want %v", addr, got, want)
				}
			}
		})
	}
}
