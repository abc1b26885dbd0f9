package report

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// Reporter emits an Event on a managed VirtualMachine whenever its
// virtstation.io/injected record changes. The webhook cannot do it itself:
// on CREATE the object has no UID yet, and an Event without one does not show
// in `kubectl describe`.
//
// A reporter that starts (or takes over leadership) reports VMs created
// after it started and later changes of older ones, so restarts do not
// flood the cluster with Events. Reconcile is safe for concurrent use.
type Reporter struct {
	Reader   client.Reader
	Recorder events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	started time.Time
	mu      sync.Mutex
	seen    map[types.UID]string
}

// SetupWithManager registers the reporter for managed VirtualMachines. VMs
// created from now on are reported.
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	r.started = r.now()
	r.seen = map[types.UID]string{}
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[api.LabelManaged] == api.LabelTrue
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("injection-reporter").
		For(&kubevirtv1.VirtualMachine{}, builder.WithPredicates(managed, predicate.AnnotationChangedPredicate{})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vm kubevirtv1.VirtualMachine
	if err := r.Reader.Get(ctx, req.NamespacedName, &vm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	record := vm.Annotations[api.AnnotationInjected]
	if !r.shouldReport(&vm, record) || record == "" {
		return ctrl.Result{}, nil
	}
	in, err := api.ParseInjected(record)
	if err != nil {
		return ctrl.Result{}, nil // not ours to fix here; the webhook rewrites it
	}
	r.Recorder.Eventf(&vm, nil, corev1.EventTypeNormal, mutate.ReasonInjected, "Mutate", "virtstation %s", in.Summary())
	return ctrl.Result{}, nil
}

// shouldReport remembers record for the VM and says whether it is news.
func (r *Reporter) shouldReport(vm *kubevirtv1.VirtualMachine, record string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, known := r.seen[vm.UID]
	r.seen[vm.UID] = record
	if known {
		return last != record
	}
	// First sight: report only VMs born after this reporter started
	// (one second of slack for the creation timestamp's resolution).
	return !vm.CreationTimestamp.Time.Before(r.started.Add(-time.Second))
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
