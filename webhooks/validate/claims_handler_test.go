package validate

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/policy"
)

// patchGate holds each claim patch until want of them have started (or a
// deadline passes), so patches written one after another would be seen.
type patchGate struct {
	want int
	// conflictOnce answers the first patch of these disks with a conflict,
	// as when another admission wrote the disk since it was read.
	conflictOnce map[string]bool

	mu         sync.Mutex
	started    int
	all        chan struct{}
	concurrent bool
	conflicted map[string]bool
}

func (g *patchGate) patch(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	g.mu.Lock()
	g.started++
	if g.started == g.want {
		close(g.all)
	}
	conflict := g.conflictOnce[obj.GetName()] && !g.conflicted[obj.GetName()]
	if conflict {
		g.conflicted[obj.GetName()] = true
	}
	g.mu.Unlock()
	select {
	case <-g.all:
		g.mu.Lock()
		g.concurrent = true
		g.mu.Unlock()
	case <-time.After(2 * time.Second):
	}
	if conflict {
		return apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, obj.GetName(), nil)
	}
	return c.Patch(ctx, obj, p, opts...)
}

// TestVMHandlerClaimsDisksConcurrently: the claims on a VM's disks are
// written at the same time; a lost race still re-reads and re-evaluates,
// and a disk another VM won is still denied.
func TestVMHandlerClaimsDisksConcurrently(t *testing.T) {
	ctx := context.Background()
	engine := NewEngine(time.Second)
	if _, err := engine.Load(ctx, ShippedModules()); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		conflictOnce map[string]bool
		// winner, when set, claims disk "b" when the first conflict is
		// answered: the race was lost to it.
		winner      bool
		wantAllowed bool
		wantMessage string
	}{
		"both claimed":                 {wantAllowed: true},
		"a lost race is retried":       {conflictOnce: map[string]bool{"b": true}, wantAllowed: true},
		"a disk another VM won denies": {conflictOnce: map[string]bool{"b": true}, winner: true, wantMessage: `data disk "b" is attached writable to VM ns/winner`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gate := &patchGate{want: 2, conflictOnce: tc.conflictOnce, all: make(chan struct{}), conflicted: map[string]bool{}}
			c := fake.NewClientBuilder().WithScheme(handlerScheme(t)).
				WithObjects(labelledPVC("a", nil), labelledPVC("b", nil)).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					err := gate.patch(ctx, c, obj, p, opts...)
					if tc.winner && apierrors.IsConflict(err) {
						var b corev1.PersistentVolumeClaim
						if gerr := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b"}, &b); gerr != nil {
							return gerr
						}
						b.Annotations = map[string]string{api.AnnotationClaimedBy: "ns/winner", api.AnnotationClaimedAt: time.Now().UTC().Format(time.RFC3339)}
						if uerr := c.Update(ctx, &b); uerr != nil {
							return uerr
						}
					}
					return err
				}}).Build()
			h := &VMHandler{
				Engine: engine, Modes: &atomic.Pointer[policy.Modes]{}, Client: c,
				Snapshots: Snapshotter{Cache: c, API: c, NoDataVolumes: true, Grace: time.Minute},
			}
			resp := h.Handle(ctx, vmRequest(t, "vm", map[string]string{api.AnnotationDataDisks: "a:/a,b:/b"}, false))
			if !gate.concurrent {
				t.Errorf("the two claims were not written at the same time")
			}
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed {
				if resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantMessage) {
					t.Fatalf("result = %d %q, want 403 containing %q", resp.Result.Code, resp.Result.Message, tc.wantMessage)
				}
				return
			}
			for _, disk := range []string{"a", "b"} {
				var pvc corev1.PersistentVolumeClaim
				if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: disk}, &pvc); err != nil {
					t.Fatal(err)
				}
				if got := claims.Read(&pvc).ClaimedBy; got != "ns/vm" {
					t.Errorf("disk %s claimed by %q, want ns/vm", disk, got)
				}
			}
		})
	}
}
