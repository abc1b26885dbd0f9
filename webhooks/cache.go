package webhooks

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// CacheOptions restricts what the manager caches to what the webhooks
// read: only DataVolumes and PVCs labelled as data disks, only Secrets
// labelled as SSH key sources (other Secrets are read through the API server
// when needed), only the ConfigMaps of the install namespace and the
// lifecycle defaults (virtstation-lifecycle) of the others, and only the
// activity Leases of the install namespace. Managed
// fields are dropped from every cached object.
func CacheOptions(namespace string) cache.Options {
	dataDisk := labels.SelectorFromSet(labels.Set{api.LabelDataDisk: api.LabelTrue})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&cdiv1beta1.DataVolume{}:        {Label: dataDisk},
			&corev1.PersistentVolumeClaim{}: {Label: dataDisk},
			&corev1.Secret{}:                {Label: labels.SelectorFromSet(labels.Set{api.LabelSSHPublicKey: api.LabelTrue})},
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
				namespace: {},
				// Elsewhere, only the lifecycle defaults.
				cache.AllNamespaces: {FieldSelector: fields.OneTermEqualSelector("metadata.name", api.LifecycleConfigMap)},
			}},
			// The VMs' activity records (package lifecycle).
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{namespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{api.LabelRole: api.RoleActivity}),
			},
		},
	}
}
