package mutate

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// dryRunTTL bounds how long a dry run's Secrets are remembered: the API
// server reinvokes a webhook within the same request, a few seconds at most.
const dryRunTTL = 30 * time.Second

// secretStash remembers the Secrets a dry-run admission would have written,
// per request UID. A dry run writes nothing, yet its object already points
// at <vm>-userdata; when the API server reinvokes the webhook for the same
// request, the stash stands in for that Secret. Safe for concurrent use.
type secretStash struct {
	mu sync.Mutex
	m  map[stashKey]stashEntry
}

type stashKey struct {
	uid             types.UID
	namespace, name string
}

type stashEntry struct {
	secret  *corev1.Secret
	expires time.Time
}

func (s *secretStash) put(uid types.UID, writes []SecretWrite, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[stashKey]stashEntry{}
	}
	for k, e := range s.m {
		if now.After(e.expires) {
			delete(s.m, k)
		}
	}
	for _, w := range writes {
		s.m[stashKey{uid, w.Secret.Namespace, w.Secret.Name}] = stashEntry{w.Secret, now.Add(dryRunTTL)}
	}
}

func (s *secretStash) get(uid types.UID, namespace, name string, now time.Time) *corev1.Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[stashKey{uid, namespace, name}]
	if !ok || now.After(e.expires) {
		return nil
	}
	return e.secret
}

// stashedCluster reads a dry-run request's own Secrets from the stash first.
type stashedCluster struct {
	Cluster
	stash *secretStash
	uid   types.UID
}

// Secret implements Cluster.
func (c stashedCluster) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	if s := c.stash.get(c.uid, namespace, name, time.Now()); s != nil {
		return s, nil
	}
	return c.Cluster.Secret(ctx, namespace, name)
}
