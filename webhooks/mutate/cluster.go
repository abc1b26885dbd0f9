package mutate

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cluster is the cluster state a mutation reads. Implementations answer from
// informer caches or in-memory objects; only Secret may read through to the
// API server, and only for a VM whose user-data sits in a Secret.
type Cluster interface {
	// MACOwners returns the VirtualMachines whose interfaces use addr.
	MACOwners(ctx context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error)
	// DataDisk returns the kind (KindDataVolume, else KindPVC) of the data
	// disk name in namespace: a DataVolume or PVC labelled
	// virtstation.io/data-disk=true. ok is false when there is none.
	DataDisk(ctx context.Context, namespace, name string) (kind string, ok bool, err error)
	// VMIExists reports whether the VirtualMachineInstance exists.
	VMIExists(ctx context.Context, namespace, name string) (bool, error)
	// SSHKeys returns the valid public keys of the namespace's Secrets
	// labelled virtstation.io/ssh-public-key=true, normalized and sorted.
	SSHKeys(ctx context.Context, namespace string) ([]string, error)
	// Secret returns a Secret, or nil when it does not exist.
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}
