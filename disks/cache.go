package disks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// Cache answers Lookup from a controller-runtime reader: the manager's
// cache (with informers on DataVolumes and PVCs), or its API reader for a
// read that must see the latest write. Safe for concurrent use.
type Cache struct {
	// Reader reads DataVolumes and PVCs.
	Reader client.Reader
	// NoDataVolumes: CDI is not installed; data disks are bare PVCs only.
	NoDataVolumes bool
}

var _ Lookup = Cache{}

// Disk implements Lookup.
func (c Cache) Disk(ctx context.Context, namespace, name string) (Disk, bool, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if !c.NoDataVolumes {
		dv := &cdiv1beta1.DataVolume{}
		switch err := c.Reader.Get(ctx, key, dv); {
		case err == nil:
			return of(api.KindDataVolume, dv), true, nil
		case !apierrors.IsNotFound(err):
			return Disk{}, false, fmt.Errorf("read DataVolume %s: %w", name, err)
		}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	switch err := c.Reader.Get(ctx, key, pvc); {
	case err == nil:
		return of(api.KindPVC, pvc), true, nil
	case !apierrors.IsNotFound(err):
		return Disk{}, false, fmt.Errorf("read PVC %s: %w", name, err)
	}
	return Disk{}, false, nil
}
