package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/virtstation/virtstation/internal/testenv"
)

// namespaceSweepEvery is how often finalizeNamespaces looks for deleted
// namespaces: often enough that `kubectl delete` (which waits) returns at
// once, seldom enough to cost nothing.
const namespaceSweepEvery = 200 * time.Millisecond

// namespaceGrace is how long finalizeNamespaces leaves a deleted namespace
// alone, as the namespace controller's queue does on a cluster.
const namespaceGrace = time.Second

var (
	ipOnce sync.Once
	ip     *testenv.ControlPlane
	ipErr  error
)

// installPlane starts, once, a second control plane with the same CRDs as
// controlPlane, for tests that really install (the commands of the docs,
// the GitOps round trips): they leave webhook configurations and releases
// behind, which must not meet the dry-run tests' expectations of an empty
// cluster.
func installPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	root := repoRoot(t)
	ipOnce.Do(func() { ip, ipErr = startWithCRDs(root) })
	if ipErr != nil {
		t.Fatal(ipErr)
	}
	return ip
}

// finalizeNamespaces does, until ctx is done, what kube-controller-manager's
// namespace controller does and envtest does not run: it deletes what is in
// a namespace being deleted, then removes the namespace's finalizer, so
// that `kubectl delete namespace` (and `kubectl delete -k`, which waits)
// finishes as on a cluster.
func finalizeNamespaces(ctx context.Context, t *testing.T, p *testenv.ControlPlane) {
	t.Helper()
	// Deleting every collection draws deprecation warnings (Endpoints,
	// Jobs) that say nothing about Virtstation.
	cfg := rest.CopyConfig(p.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(namespaceSweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			ns := &list.Items[i]
			// Like the namespace controller, start a moment after the
			// deletion, not within the same request burst as kubectl's.
			if ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 || time.Since(ns.DeletionTimestamp.Time) < namespaceGrace {
				continue
			}
			emptyNamespace(ctx, cs, dyn, ns.Name)
			ns.Spec.Finalizers = nil
			_, _ = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		}
	}
}

// emptyNamespace deletes every object of every namespaced resource that can
// be deleted as a collection.
func emptyNamespace(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns string) {
	lists, _ := cs.Discovery().ServerPreferredNamespacedResources()
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "deletecollection") {
				continue
			}
			_ = dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
	}
}

// apply server-side applies u for real, as a GitOps controller does (Flux
// forces ownership of the fields it applies, as here), with strict field
// validation; dryRun adds dryRun=All, as `kubectl diff --server-side` does.
// It returns the object the API server answers.
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := a.resource(u)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true), FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
}

// get reads the live object.
func (a *applier) get(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := a.resource(u)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, u.GetName(), metav1.GetOptions{})
}

// resource is u's resource client, namespaced when its kind is.
func (a *applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource), nil
	}
	if u.GetNamespace() == "" {
		return nil, fmt.Errorf("%s: namespaced, but rendered without a namespace", key(u))
	}
	return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
}

// ensureNamespace creates a namespace in p when it does not exist.
func ensureNamespace(t *testing.T, p *testenv.ControlPlane, name string) {
	t.Helper()
	if err := createNamespace(p.Config, name, nil); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
