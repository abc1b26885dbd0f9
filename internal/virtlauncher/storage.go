package virtlauncher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClaimImage is the raw image file of claim namespace/name in storage: the
// PVC's bytes, kept across boots. Tests put a prepared disk there before
// the first boot.
func ClaimImage(storage, namespace, name string) string {
	return filepath.Join(storage, namespace+"_"+name+".img")
}

var (
	dataVolumeGVK = schema.GroupVersionKind{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}
	pvcGVK        = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
)

// claimFile returns the claim's image, creating it blank (sparse) at the
// size the DataVolume or PVC requests when it does not exist yet: what
// CDI's blank source and a volume provisioner would give the VM.
func claimFile(ctx context.Context, c client.Reader, storage, namespace, name string, dataVolume bool) (string, error) {
	path := ClaimImage(storage, namespace, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	size, err := claimSize(ctx, c, namespace, name, dataVolume)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	return path, errors.Join(f.Truncate(size), f.Close())
}

// claimSize is the storage the claim requests.
func claimSize(ctx context.Context, c client.Reader, namespace, name string, dataVolume bool) (int64, error) {
	u := &unstructured.Unstructured{}
	fields := [][]string{{"spec", "resources", "requests", "storage"}}
	u.SetGroupVersionKind(pvcGVK)
	if dataVolume {
		u.SetGroupVersionKind(dataVolumeGVK)
		fields = [][]string{{"spec", "storage", "resources", "requests", "storage"}, {"spec", "pvc", "resources", "requests", "storage"}}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return 0, fmt.Errorf("virtlauncher: %s %s/%s: %w", u.GetKind(), namespace, name, err)
	}
	for _, f := range fields {
		if s, ok, _ := unstructured.NestedString(u.Object, f...); ok {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return 0, fmt.Errorf("virtlauncher: %s %s/%s: %w", u.GetKind(), namespace, name, err)
			}
			return q.Value(), nil
		}
	}
	return 0, fmt.Errorf("virtlauncher: %s %s/%s requests no storage size", u.GetKind(), namespace, name)
}
