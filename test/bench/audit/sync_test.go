package audit_test

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheSyncTimeout bounds the waits for the manager's cache to catch up
// with the API server.
const cacheSyncTimeout = 5 * time.Minute

// versions lists objects through r and returns their resourceVersions by
// namespace/name.
func versions(ctx context.Context, r client.Reader, list client.ObjectList, opts ...client.ListOption) (map[string]string, error) {
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		o, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		out[o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	return out, nil
}

// waitCount waits until r lists at least n objects.
func waitCount(ctx context.Context, r client.Reader, list client.ObjectList, n int, opts ...client.ListOption) error {
	deadline := time.Now().Add(cacheSyncTimeout)
	for {
		got, err := versions(ctx, r, list, opts...)
		if err != nil {
			return err
		}
		if len(got) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d objects listed, want %d", len(got), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSame waits until the cache lists the same objects, at the same
// resourceVersions, as the API server: what the audit reads is what is
// stored. newList returns an empty list of the kind.
func waitSame(ctx context.Context, cache, apiServer client.Reader, newList func() client.ObjectList, opts ...client.ListOption) error {
	deadline := time.Now().Add(cacheSyncTimeout)
	for {
		want, err := versions(ctx, apiServer, newList(), opts...)
		if err != nil {
			return err
		}
		got, err := versions(ctx, cache, newList(), opts...)
		if err != nil {
			return err
		}
		if maps.Equal(want, got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cache lists %d objects, the API server %d, or their versions differ", len(got), len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
