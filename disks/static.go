package disks

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
)

// GroupKinds of the objects a data disk is.
var (
	groupKindDataVolume = schema.GroupKind{Group: "cdi.kubevirt.io", Kind: api.KindDataVolume}
	groupKindPVC        = schema.GroupKind{Kind: api.KindPVC}
)

// Static answers Lookup from objects given up front: the manifests and
// cluster objects of `virtstation render`, or a unit test's. Fill it with
// Add before use; it is then safe for concurrent reads (SetClaims is not).
type Static struct {
	disks map[types.NamespacedName]Disk
}

var _ Lookup = (*Static)(nil)

// NewStatic returns an empty Static.
func NewStatic() *Static {
	return &Static{disks: map[types.NamespacedName]Disk{}}
}

// Add records obj when it is a DataVolume or a PVC (by its apiVersion and
// kind), in namespace ns when it names none, and reports whether it did.
// A DataVolume wins over a PVC of the same name, whichever comes first, as
// Cache answers.
func (s *Static) Add(obj *unstructured.Unstructured, ns string) bool {
	var kind string
	switch obj.GroupVersionKind().GroupKind() {
	case groupKindDataVolume:
		kind = api.KindDataVolume
	case groupKindPVC:
		kind = api.KindPVC
	default:
		return false
	}
	if obj.GetNamespace() == "" {
		obj = obj.DeepCopy()
		obj.SetNamespace(ns)
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if have, ok := s.disks[key]; ok && have.Kind == api.KindDataVolume && kind == api.KindPVC {
		return true
	}
	s.disks[key] = of(kind, obj)
	return true
}

// SetClaims replaces the claims recorded for a disk that was added, as a
// claim write would (render admits VMs in order); it does nothing for a
// disk that was not.
func (s *Static) SetClaims(namespace, name string, st claims.State) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if d, ok := s.disks[key]; ok {
		d.Claims = st
		s.disks[key] = d
	}
}

// Disk implements Lookup.
func (s *Static) Disk(_ context.Context, namespace, name string) (Disk, bool, error) {
	d, ok := s.disks[types.NamespacedName{Namespace: namespace, Name: name}]
	return d, ok, nil
}
