package session

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// leaseLister reads the watch's cache of the managed Leases.
type leaseLister struct {
	store     cache.Store
	namespace string
}

// get returns the cached Lease called name, nil when there is none. The
// caller must not modify it.
func (l leaseLister) get(name string) *coordinationv1.Lease {
	obj, ok, err := l.store.GetByKey(l.namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	lease, _ := obj.(*coordinationv1.Lease)
	return lease
}

// each calls f with every cached Lease.
func (l leaseLister) each(f func(*coordinationv1.Lease)) {
	for _, obj := range l.store.List() {
		if lease, ok := obj.(*coordinationv1.Lease); ok {
			f(lease)
		}
	}
}

// watch starts an informer on the managed Leases (sessions and heartbeats)
// in r's namespace that tells a local session when another writer changed
// or deleted its Lease, and waits for it to sync. The informer stops when
// ctx ends. Its cache holds the other replicas' heartbeats for decide.
func (r *Registry) watch(ctx context.Context) (leaseLister, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(r.client, 0,
		informers.WithNamespace(r.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }),
		// Nothing reads managedFields: the cache keeps every session
		// Lease without them.
		informers.WithTransform(crcache.TransformStripManagedFields()))
	inf := factory.Coordination().V1().Leases().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) { r.observe(obj, true) },
	})
	if err != nil {
		return leaseLister{}, fmt.Errorf("watch session leases: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return leaseLister{}, errors.New("watch session leases: stopped before the first list completed")
	}
	return leaseLister{store: inf.GetStore(), namespace: r.namespace}, nil
}

// observe hands a change of a local session's Lease to compareLocked.
func (r *Registry) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sessions[l.Name]; s != nil {
		r.compareLocked(s, l, deleted)
	}
}

// compareLocked compares the local session s with its Lease l as the watch
// delivered it (deleted: its last state). The watch delivers one Lease's
// changes in order, so once it has delivered s's own write, a Lease that
// is gone or names someone else is newer than that write: s has lost its
// slot. Before, l may be older than s's write (the very Lease the claim
// replaced, or older still); unless it is the one the claim replaced, the
// checker then reads the Lease to know. r.mu is held.
func (r *Registry) compareLocked(s *Session, l *coordinationv1.Lease, deleted bool) {
	switch {
	case !deleted && holderIdentity(l) == s.holder.String():
		s.seen = true
	case !deleted && s.prevRV != "" && l.ResourceVersion == s.prevRV:
		// The Lease as the claim read it, before its write: old news.
	case s.seen && deleted:
		r.endLocked(s, fmt.Errorf("%w: its lease was deleted", ErrExpired), false)
	case s.seen:
		r.endLocked(s, lostReason(l, s.holder.String()), false)
	default:
		r.checks.Add(l.Name)
	}
}

// checkLoop reads the Leases compareLocked could not judge from the watch
// and ends the local sessions they no longer name, until the queue shuts
// down. A failed read is retried.
func (r *Registry) checkLoop(ctx context.Context) {
	for {
		name, shutdown := r.checks.Get()
		if shutdown {
			return
		}
		if err := r.check(ctx, name); err != nil && ctx.Err() == nil {
			r.checks.AddRateLimited(name)
		} else {
			r.checks.Forget(name)
		}
		r.checks.Done(name)
	}
}

// check reads the Lease called name and ends the local session holding it
// when the Lease is gone or names someone else.
func (r *Registry) check(ctx context.Context, name string) error {
	// The session to judge is the one registered before the read: its
	// write precedes the read, so the read is no older than it.
	r.mu.Lock()
	s := r.sessions[name]
	r.mu.Unlock()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.RenewInterval)
	defer cancel()
	l, err := r.leases().Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		r.endLocked(s, fmt.Errorf("%w: its lease was deleted", ErrExpired), false)
	case holderIdentity(l) != s.holder.String():
		r.endLocked(s, lostReason(l, s.holder.String()), false)
	}
	return nil
}
