package mutate

import (
	"context"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/disks"
	"github.com/virtstation/virtstation/lifecycle/defaults"
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
// IndexMAC index on VirtualMachines and informers on VirtualMachineInstances,
// DataVolumes, PVCs, KubeVirt CRs and the lifecycle ConfigMaps. It reads no
// Secret.
//
// +kubebuilder:rbac:groups=kubevirt.io,resources=kubevirts,verbs=list;watch
type CacheCluster struct {
	// Lookup finds data disks: a disks.Cache on the same cache.
	disks.Lookup
	// Reader is the cache.
	Reader client.Reader
	// NoKubeVirt: the cluster serves no kubevirts.kubevirt.io, so there is
	// no informer on it and no default architecture.
	NoKubeVirt bool
	// Namespace is the install namespace, whose lifecycle ConfigMap is the
	// cluster's defaults.
	Namespace string
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

// VMIExists implements Cluster from the VMI cache.
func (c CacheCluster) VMIExists(ctx context.Context, namespace, name string) (bool, error) {
	var vmi kubevirtv1.VirtualMachineInstance
	err := c.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &vmi)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// DefaultArchitecture implements Cluster from the cache of KubeVirt CRs.
func (c CacheCluster) DefaultArchitecture(ctx context.Context) (string, error) {
	if c.NoKubeVirt {
		return "", nil
	}
	var list kubevirtv1.KubeVirtList
	if err := c.Reader.List(ctx, &list); err != nil {
		return "", fmt.Errorf("list KubeVirt CRs: %w", err)
	}
	return KubeVirtDefaultArchitecture(list.Items), nil
}

// LifecycleDefaults implements Cluster from the cache, as the lifecycle
// controller reads them (defaults.Read).
func (c CacheCluster) LifecycleDefaults(ctx context.Context, namespace string) (d api.LifecycleDefaults, invalid, err error) {
	return defaults.Read(ctx, c.Reader, c.Namespace, namespace)
}
