package mutate

import (
	"context"
	"net"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/disks"
)

// StaticCluster answers Cluster from a fixed set of objects, for offline
// rendering and unit tests. Build it with NewStaticCluster and the Add
// methods before use; it is then safe for concurrent reads.
type StaticCluster struct {
	// Static finds data disks; NewStaticCluster starts it empty.
	*disks.Static
	macs map[string][]types.NamespacedName
	// vmMACs are the MACs each VM was indexed under, for SetVM.
	vmMACs  map[types.NamespacedName][]string
	vmis    sets.Set[types.NamespacedName]
	secrets map[types.NamespacedName]*corev1.Secret
	// kubevirts are the KubeVirt CRs, for DefaultArchitecture.
	kubevirts []kubevirtv1.KubeVirt
	// defaultArch, when set, overrides the KubeVirt CRs.
	defaultArch string
	// lifecycleData is the data of the lifecycle ConfigMaps, by namespace.
	lifecycleData map[string]map[string]string
	// installNamespace holds the cluster's lifecycle ConfigMap; "" none.
	installNamespace string
	// CollectKeys turns key Secrets into public keys; nil means no keys.
	CollectKeys func([]corev1.Secret) []string
}

var _ Cluster = (*StaticCluster)(nil)

// NewStaticCluster indexes vms the way the webhook's cache does.
func NewStaticCluster(vms []kubevirtv1.VirtualMachine) *StaticCluster {
	c := &StaticCluster{
		Static:  disks.NewStatic(),
		macs:    map[string][]types.NamespacedName{},
		vmMACs:  map[types.NamespacedName][]string{},
		vmis:    sets.New[types.NamespacedName](),
		secrets: map[types.NamespacedName]*corev1.Secret{},
		// The lifecycle ConfigMaps' data, by namespace.
		lifecycleData: map[string]map[string]string{},
	}
	for i := range vms {
		c.SetVM(&vms[i])
	}
	return c
}

// SetVM adds vm to the VM view, or replaces the VM of its namespace and
// name there, in time proportional to its MACs and their owners (render
// adds the VMs it admits one by one).
func (c *StaticCluster) SetVM(vm *kubevirtv1.VirtualMachine) {
	key := client.ObjectKeyFromObject(vm)
	for _, m := range c.vmMACs[key] {
		c.macs[m] = slices.DeleteFunc(c.macs[m], func(o types.NamespacedName) bool { return o == key })
		if len(c.macs[m]) == 0 {
			delete(c.macs, m)
		}
	}
	macs := MACIndexer(vm)
	if len(macs) == 0 {
		delete(c.vmMACs, key)
		return
	}
	c.vmMACs[key] = macs
	for _, m := range macs {
		owners := c.macs[m]
		// Sorted by String(), as the cache's index lists them.
		i, _ := slices.BinarySearchFunc(owners, key, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		c.macs[m] = slices.Insert(owners, i, key)
	}
}

// WithVMs returns a copy of c whose VM view is vms (indexed as
// NewStaticCluster does); the other objects are shared.
func (c *StaticCluster) WithVMs(vms []kubevirtv1.VirtualMachine) *StaticCluster {
	out := NewStaticCluster(vms)
	out.Static, out.vmis, out.secrets, out.CollectKeys = c.Static, c.vmis, c.secrets, c.CollectKeys
	out.kubevirts, out.defaultArch = c.kubevirts, c.defaultArch
	out.lifecycleData, out.installNamespace = c.lifecycleData, c.installNamespace
	return out
}

// AddDataDisk records a DataVolume (api.KindDataVolume) or PVC (api.KindPVC)
// with its labels in Static; only those labelled a data disk are attached.
// A DataVolume wins over a PVC of the same name, as CDI's PVC belongs to it.
func (c *StaticCluster) AddDataDisk(kind, namespace, name string, labels map[string]string) {
	obj := &unstructured.Unstructured{}
	if kind == api.KindDataVolume {
		obj.SetGroupVersionKind(cdiv1beta1.SchemeGroupVersion.WithKind(kind))
	} else {
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	}
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetLabels(labels)
	c.Add(obj, namespace)
}

// AddVMI records a running VirtualMachineInstance.
func (c *StaticCluster) AddVMI(namespace, name string) {
	c.vmis.Insert(types.NamespacedName{Namespace: namespace, Name: name})
}

// AddSecret records a Secret.
func (c *StaticCluster) AddSecret(s *corev1.Secret) {
	c.secrets[client.ObjectKeyFromObject(s)] = s
}

// MACOwners implements Cluster.
func (c *StaticCluster) MACOwners(_ context.Context, addr net.HardwareAddr) ([]types.NamespacedName, error) {
	return append([]types.NamespacedName(nil), c.macs[addr.String()]...), nil
}

// VMIExists implements Cluster.
func (c *StaticCluster) VMIExists(_ context.Context, namespace, name string) (bool, error) {
	return c.vmis.Has(types.NamespacedName{Namespace: namespace, Name: name}), nil
}

// KeySecrets returns the namespace's key Secrets, sorted by name.
func (c *StaticCluster) KeySecrets(namespace string) []corev1.Secret {
	var in []corev1.Secret
	for key, s := range c.secrets {
		if key.Namespace == namespace && s.Labels[api.LabelSSHPublicKey] == api.LabelTrue {
			in = append(in, *s)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].Name < in[j].Name })
	return in
}

// SSHKeys returns the valid public keys of the namespace's key Secrets,
// as the reconcilers collect them: render previews their Secrets.
func (c *StaticCluster) SSHKeys(_ context.Context, namespace string) ([]string, error) {
	if c.CollectKeys == nil {
		return nil, nil
	}
	return c.CollectKeys(c.KeySecrets(namespace)), nil
}

// Secret returns a Secret added with AddSecret, or nil: render previews the
// reconcilers' Secrets. The webhook reads no Secret (Cluster has none).
func (c *StaticCluster) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	return c.secrets[types.NamespacedName{Namespace: namespace, Name: name}], nil
}

// AddKubeVirt records a KubeVirt CR: its default architecture is the one
// DefaultArchitecture reports (see KubeVirtDefaultArchitecture).
func (c *StaticCluster) AddKubeVirt(kv *kubevirtv1.KubeVirt) {
	c.kubevirts = append(c.kubevirts, *kv.DeepCopy())
}

// SetDefaultArchitecture makes DefaultArchitecture report arch whatever the
// KubeVirt CRs say; "" goes back to them.
func (c *StaticCluster) SetDefaultArchitecture(arch string) {
	c.defaultArch = arch
}

// DefaultArchitecture implements Cluster.
func (c *StaticCluster) DefaultArchitecture(context.Context) (string, error) {
	if c.defaultArch != "" {
		return c.defaultArch, nil
	}
	return KubeVirtDefaultArchitecture(c.kubevirts), nil
}

// AddLifecycleConfigMap records the data of the lifecycle ConfigMap
// (api.LifecycleConfigMap) of namespace.
func (c *StaticCluster) AddLifecycleConfigMap(namespace string, data map[string]string) {
	c.lifecycleData[namespace] = data
}

// SetInstallNamespace names the install namespace, whose lifecycle
// ConfigMap is the cluster's defaults; "" (the default) has none.
func (c *StaticCluster) SetInstallNamespace(namespace string) {
	c.installNamespace = namespace
}

// LifecycleDefaults implements Cluster: the built-in defaults, under the
// lifecycle ConfigMaps recorded with AddLifecycleConfigMap.
func (c *StaticCluster) LifecycleDefaults(_ context.Context, namespace string) (d api.LifecycleDefaults, invalid, err error) {
	return api.LayerLifecycleDefaults(c.installNamespace, namespace, func(ns string) (map[string]string, bool, error) {
		data, ok := c.lifecycleData[ns]
		return data, ok, nil
	})
}
