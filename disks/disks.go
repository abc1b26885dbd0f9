package disks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
)

// Disk is the object a data disk's name denotes.
type Disk struct {
	// Kind is api.KindDataVolume or api.KindPVC.
	Kind string
	// Labelled: the object carries virtstation.io/data-disk=true.
	Labelled bool
	// Claims are what its claim annotations say.
	Claims claims.State
	// Object is the DataVolume or PVC as read; a claim write is conditional
	// on its resourceVersion.
	Object client.Object
}

// Lookup finds data disks by name.
type Lookup interface {
	// Disk returns the DataVolume named name in namespace, else the PVC of
	// that name, labelled or not; ok is false when neither exists.
	Disk(ctx context.Context, namespace, name string) (d Disk, ok bool, err error)
}

// of describes obj, a DataVolume or PVC of the given kind.
func of(kind string, obj client.Object) Disk {
	return Disk{Kind: kind, Labelled: obj.GetLabels()[api.LabelDataDisk] == api.LabelTrue, Claims: claims.Read(obj), Object: obj}
}
