package mutate

import (
	"context"
	"net"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/mac"
)

// IndexMAC is the cache index of VirtualMachines by interface MAC
// (lower-case, colon-separated).
const IndexMAC = "virtstation.io/mac"

// MACIndexer returns the MACs of a VirtualMachine's interfaces, normalized,
// for the IndexMAC cache index. Unparseable MACs are left out.
func MACIndexer(obj client.Object) []string {
	vm, ok := obj.(*kubevirtv1.VirtualMachine)
	if !ok || vm.Spec.Template == nil {
		return nil
	}
	var out []string
	for _, iface := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
		if iface.MacAddress == "" {
			continue
		}
		if addr, err := mac.Parse(iface.MacAddress); err == nil {
			out = append(out, addr.String())
		}
	}
	return out
}

// CacheCluster answers Cluster from a controller-runtime cache that has the
// IndexMAC index on VirtualMachines.
type CacheCluster struct {
	Reader client.Reader
}

var _ Cluster = CacheCluster{}

// MACOwners implements Cluster.
func (c CacheCluster) MACOwners(ctx context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error) {
	var vms kubevirtv1.VirtualMachineList
	if err := c.Reader.List(ctx, &vms, client.MatchingFields{IndexMAC: addr.String()}); err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(vms.Items))
	for i := range vms.Items {
		out = append(out, client.ObjectKeyFromObject(&vms.Items[i]))
	}
	return out, nil
}
