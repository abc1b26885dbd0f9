package audit

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/policyreport"
)

// reportKey names one report object.
type reportKey struct {
	kind schema.GroupVersionKind
	name string
}

// listReports lists Virtstation's reports of kind gvk in ns.
func (a *Auditor) listReports(ctx context.Context, ns string, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	// Read only (says, FromObject): no copies.
	if err := a.Reader.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{policyreport.LabelManagedBy: policyreport.ManagedBy}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	return list.Items, nil
}

// syncReports makes ns's reports of each kind those of want: it writes a
// report only when what is stored says something else, and deletes
// Virtstation's reports want no longer has. A report that the cache shows
// differing from what was last written for it is read from the API server
// before it is written, so a cache that has not caught up with the last
// write costs a read, not a write.
func (a *Auditor) syncReports(ctx context.Context, ns string, st *namespaceState, want []policyreport.Report) error {
	for _, gvk := range a.Kinds {
		existing, err := a.listReports(ctx, ns, gvk)
		if err != nil {
			return err
		}
		stored := make(map[string]*unstructured.Unstructured, len(existing))
		for i := range existing {
			stored[existing[i].GetName()] = &existing[i]
		}
		for _, r := range want {
			if err := a.syncReport(ctx, st, gvk, r, stored[r.Name]); err != nil {
				return err
			}
			delete(stored, r.Name)
		}
		for name, u := range stored {
			if err := a.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s/%s: %w", gvk.Kind, ns, name, err)
			}
			delete(st.written, reportKey{gvk, name})
			a.metrics().wrote(gvk, "delete")
		}
	}
	return nil
}

// syncReport writes r as a report of kind gvk unless the stored report
// already says it. cached is the cache's copy (nil when it has none); when
// it is not the version the audit last wrote (the cache lags behind that
// write, or someone else changed the report since), the API server's copy
// is read instead, so a lagging cache costs a read, not a conflicting write.
func (a *Auditor) syncReport(ctx context.Context, st *namespaceState, gvk schema.GroupVersionKind, r policyreport.Report, cached *unstructured.Unstructured) error {
	key := reportKey{gvk, r.Name}
	current := cached
	if rv, ok := st.written[key]; ok && (cached == nil || cached.GetResourceVersion() != rv) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(gvk)
		err := a.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, live)
		switch {
		case err == nil:
			current = live
		case apierrors.IsNotFound(err):
			current = nil
		default:
			return fmt.Errorf("read %s %s/%s: %w", gvk.Kind, r.Namespace, r.Name, err)
		}
	}
	if current != nil && says(current, r) {
		st.written[key] = current.GetResourceVersion()
		return nil
	}
	obj, err := policyreport.Object(r, gvk)
	if err != nil {
		return err
	}
	if current == nil {
		if err := a.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s %s/%s: %w", gvk.Kind, r.Namespace, r.Name, err)
		}
		a.metrics().wrote(gvk, "create")
	} else {
		obj.SetResourceVersion(current.GetResourceVersion())
		obj.SetUID(current.GetUID())
		if err := a.Client.Update(ctx, obj); err != nil {
			return fmt.Errorf("update %s %s/%s: %w", gvk.Kind, r.Namespace, r.Name, err)
		}
		a.metrics().wrote(gvk, "update")
	}
	st.written[key] = obj.GetResourceVersion()
	return nil
}

// says reports whether a stored report holds exactly r, with Virtstation's
// label.
func says(u *unstructured.Unstructured, r policyreport.Report) bool {
	if u.GetLabels()[policyreport.LabelManagedBy] != policyreport.ManagedBy {
		return false
	}
	got, err := policyreport.FromObject(u)
	return err == nil && policyreport.Equal(got, r)
}
