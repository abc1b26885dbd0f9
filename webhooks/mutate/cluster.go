package mutate

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/disks"
)

// Cluster is the cluster state a mutation reads. Implementations answer from
// informer caches or in-memory objects; only Secret may read through to the
// API server, and only for a VM whose user-data sits in a Secret.
type Cluster interface {
	// Lookup finds the data disks the virtstation.io/data-disks annotation
	// names; the step attaches only those labelled
	// virtstation.io/data-disk=true.
	disks.Lookup
	// MACOwners returns the VirtualMachines whose interfaces use addr.
	MACOwners(ctx context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error)
	// VMIExists reports whether the VirtualMachineInstance exists.
	VMIExists(ctx context.Context, namespace, name string) (bool, error)
	// SSHKeys returns the valid public keys of the namespace's Secrets
	// labelled virtstation.io/ssh-public-key=true, normalized and sorted.
	SSHKeys(ctx context.Context, namespace string) ([]string, error)
	// Secret returns a Secret, or nil when it does not exist.
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// DefaultArchitecture is the architecture KubeVirt gives a VM that
	// names none (KubeVirtDefaultArchitecture of the KubeVirt CR), or ""
	// when the cluster has no KubeVirt CR; the mutation then takes
	// api.DefaultArch.
	DefaultArchitecture(ctx context.Context) (string, error)
}
