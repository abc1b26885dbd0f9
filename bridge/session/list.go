package session

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Status is who holds one mode's slot of a VM.
type Status struct {
	Mode   string
	Holder Holder
}

// List says who holds which slots of the VM namespace/name, sorted by mode.
// Vacant slots (released, expired, never used) are left out. It reads the
// session Leases from the API server, and their holders' heartbeats from
// the watch's cache (the API server when it says stale, or before Start),
// so it needs no Start.
func (r *Registry) List(ctx context.Context, namespace, name string) ([]Status, error) {
	sel := labels.Set{labelManagedBy: managedByBridge, labelVM: vmHash(namespace, name)}.String()
	list, err := r.leases().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list session leases of %s/%s: %w", namespace, name, err)
	}
	var out []Status
	for i := range list.Items {
		l := &list.Items[i]
		// The VM's other Leases (its activity record) carry a role.
		if l.Labels[labelRole] != "" || l.Annotations[annNamespace] != namespace || l.Annotations[annName] != name {
			continue
		}
		// No user is "": decide says vacant or occupied.
		if v, err := r.decide(ctx, l, ""); err != nil {
			return nil, fmt.Errorf("read the heartbeat of %s/%s's %s session holder: %w", namespace, name, l.Annotations[annMode], err)
		} else if v == vacant {
			continue
		}
		out = append(out, Status{Mode: l.Annotations[annMode], Holder: holderOf(l)})
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Mode, b.Mode) })
	return out, nil
}
