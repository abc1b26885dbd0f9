// Package defaults reads the lifecycle's namespace defaults and the
// cluster's limits (the virtstation-lifecycle ConfigMaps) through a
// controller-runtime reader. The lifecycle controller and the mutating
// webhook both read them with Read, so they cannot disagree; the layering
// itself is api.LayerLifecycleDefaults.
package defaults

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// Read reads the lifecycle defaults of namespace through r (the manager's
// cache): its lifecycle ConfigMap over the install namespace's, layered by
// api.LayerLifecycleDefaults, whose results it returns.
func Read(ctx context.Context, r client.Reader, install, namespace string) (d api.LifecycleDefaults, invalid, err error) {
	return api.LayerLifecycleDefaults(install, namespace, func(ns string) (map[string]string, bool, error) {
		var cm corev1.ConfigMap
		err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: api.LifecycleConfigMap}, &cm)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return cm.Data, true, nil
	})
}
