package session

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watch starts an informer on the session Leases in r's namespace that
// wakes a local session whose Lease another writer changed or deleted, and
// waits for it to sync. The informer stops when ctx ends.
func (r *Registry) watch(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(r.client, 0,
		informers.WithNamespace(r.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }))
	inf := factory.Coordination().V1().Leases().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) { r.observe(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("watch session leases: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("watch session leases: stopped before the first list completed")
	}
	return nil
}

// observe wakes the local session of a Lease that was deleted or names
// another holder. The session then reads the Lease itself: an event may be
// older than the session's own write.
func (r *Registry) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	r.mu.Lock()
	s := r.sessions[l.Name]
	r.mu.Unlock()
	if s == nil || (!deleted && holderIdentity(l) == s.holder.String()) {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}
