package mutate

import (
	"context"
	"net"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StaticCluster answers Cluster from a fixed set of objects, for offline
// rendering and unit tests.
type StaticCluster struct {
	macs map[string][]types.NamespacedName
}

var _ Cluster = (*StaticCluster)(nil)

// NewStaticCluster indexes vms the way the webhook's cache does.
func NewStaticCluster(vms []kubevirtv1.VirtualMachine) *StaticCluster {
	c := &StaticCluster{macs: map[string][]types.NamespacedName{}}
	for i := range vms {
		key := client.ObjectKeyFromObject(&vms[i])
		for _, m := range MACIndexer(&vms[i]) {
			c.macs[m] = append(c.macs[m], key)
		}
	}
	for _, owners := range c.macs {
		sort.Slice(owners, func(i, j int) bool { return owners[i].String() < owners[j].String() })
	}
	return c
}

// MACOwners implements Cluster.
func (c *StaticCluster) MACOwners(_ context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error) {
	return append([]types.NamespacedName(nil), c.macs[addr.String()]...), nil
}
