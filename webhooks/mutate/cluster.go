package mutate

import (
	"context"
	"net"

	"k8s.io/apimachinery/pkg/types"
)

// Cluster is the cluster state a mutation reads. Implementations answer from
// informer caches or in-memory objects: never an API call per request.
type Cluster interface {
	// MACOwners returns the VirtualMachines whose interfaces use addr.
	MACOwners(ctx context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error)
}
