package mutate

import (
	"context"
	"net"

	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/disks"
)

// Cluster is the cluster state a mutation reads. Implementations answer from
// informer caches or in-memory objects. It offers no Secret: the webhook
// reads no Secret data, so a forged request cannot make it reveal any.
type Cluster interface {
	// Lookup finds the data disks the virtstation.io/data-disks annotation
	// names; the step attaches only those labelled
	// virtstation.io/data-disk=true.
	disks.Lookup
	// MACOwners returns the VirtualMachines whose interfaces use addr.
	MACOwners(ctx context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error)
	// VMIExists reports whether the VirtualMachineInstance exists.
	VMIExists(ctx context.Context, namespace, name string) (bool, error)
	// DefaultArchitecture is the architecture KubeVirt gives a VM that
	// names none (KubeVirtDefaultArchitecture of the KubeVirt CR), or ""
	// when the cluster has no KubeVirt CR; the mutation then takes
	// api.DefaultArch.
	DefaultArchitecture(ctx context.Context) (string, error)
	// LifecycleDefaults are the lifecycle defaults of namespace, as the
	// lifecycle controller reads them (api.LayerLifecycleDefaults): its
	// virtstation-lifecycle ConfigMap over the install namespace's. invalid
	// names a ConfigMap that does not parse, of which d keeps what did; err
	// is a fault reading them.
	LifecycleDefaults(ctx context.Context, namespace string) (d api.LifecycleDefaults, invalid, err error)
}
