package validate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// Event reasons the PolicyLoader reports with.
const (
	// ReasonPolicyLoaded: a policy set including the ConfigMap is active.
	ReasonPolicyLoaded = "PolicyLoaded"
	// ReasonPolicyLoadFailed: a policy set including the ConfigMap did not
	// compile or pass its tests; the previous set stays active.
	ReasonPolicyLoadFailed = "PolicyLoadFailed"
	// ReasonPolicyConfigLoaded: the enforcement modes changed.
	ReasonPolicyConfigLoaded = "PolicyConfigLoaded"
	// ReasonPolicyConfigInvalid: the modes ConfigMap does not parse; the
	// previous modes stay in force.
	ReasonPolicyConfigInvalid = "PolicyConfigInvalid"
)

// maxEventNote is the longest note an events.k8s.io/v1 Event may carry.
const maxEventNote = 1024

// policyLoadTimeout bounds one compile-and-test of a policy set.
const policyLoadTimeout = 30 * time.Second

// initialLoadTimeout bounds the first load in SetupWithManager: reading the
// ConfigMaps, then possibly two loads (the operator's set, then the shipped
// one alone).
const initialLoadTimeout = 2*policyLoadTimeout + 10*time.Second

// PolicyLoader keeps an Engine and the enforcement modes in step with the
// ConfigMaps in Namespace: those labelled virtstation.io/policy=true (every
// data key ending in .rego is an operator module named by its key, merged
// with the shipped modules) and the one named virtstation-policy-config
// (enforcement modes). It reports each load as an Event on the policy
// ConfigMaps and in Metrics, and keeps the last good policy set (and modes)
// when a change does not load.
//
// Every replica serves admissions from its own Engine, so the loader runs in
// every replica, not only the leader. SetupWithManager makes the first load
// before the manager starts, reading the ConfigMaps straight from the API
// server, so the engine is Ready (with the operator's policies and modes)
// before the webhook server serves; when they cannot be read or do not load
// then, the shipped set is loaded alone and the controller catches up. Its
// methods are safe for concurrent use.
type PolicyLoader struct {
	// Client reads the ConfigMaps when Reader is nil.
	Client client.Client
	// Reader reads the ConfigMaps; normally the manager's cache.
	Reader client.Reader
	// Namespace is the install namespace.
	Namespace string
	// Engine receives the policy sets.
	Engine *Engine
	// Recorder reports loads on the ConfigMaps.
	Recorder events.EventRecorder
	// Modes receives the enforcement modes; nil skips them.
	Modes *atomic.Pointer[policy.Modes]
	// Metrics; nil means DefaultMetrics().
	Metrics *Metrics
	// OnChange, when set, is called after a new policy set or new modes
	// became active (the policy audit re-evaluates every VM then). It must
	// not block.
	OnChange func()

	mu     sync.Mutex
	failed string // revision of the last set that failed to load
}

// SetupWithManager registers the loader's controller for the ConfigMaps (in
// every replica) and makes the first load within ctx, reading through
// mgr.GetAPIReader() since the cache has not started yet. It fails only when
// the shipped policies themselves do not load.
func (l *PolicyLoader) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if l.Reader == nil {
		l.Reader = mgr.GetCache()
	}
	watched := func(o client.Object) bool { return l.watched(o) }
	err := ctrl.NewControllerManagedBy(mgr).
		Named("policy-loader").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return watched(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return watched(e.ObjectOld) || watched(e.ObjectNew) },
			DeleteFunc:  func(e event.DeleteEvent) bool { return watched(e.Object) },
			GenericFunc: func(e event.GenericEvent) bool { return watched(e.Object) },
		})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		Complete(l)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, initialLoadTimeout)
	defer cancel()
	return l.initialLoad(logf.IntoContext(ctx, mgr.GetLogger()), mgr.GetAPIReader())
}

// watched reports whether o is one of the loader's ConfigMaps.
func (l *PolicyLoader) watched(o client.Object) bool {
	return o.GetNamespace() == l.Namespace &&
		(o.GetName() == policy.ModesConfigMapName || o.GetLabels()[api.LabelPolicy] == api.LabelTrue)
}

// InitialLoad loads the modes and the policy set through the loader's
// Reader (see SetupWithManager).
func (l *PolicyLoader) InitialLoad(ctx context.Context) error {
	return l.initialLoad(ctx, l.reader())
}

// initialLoad loads the modes and the policy set, reading through r. When
// the ConfigMaps cannot be read or their set does not load, and no set is
// active yet, it loads the shipped modules alone; it fails only when those
// fail.
func (l *PolicyLoader) initialLoad(ctx context.Context, r client.Reader) error {
	log := logf.FromContext(ctx).WithName("policy-loader")
	if err := l.syncModes(ctx, r); err != nil {
		log.Error(err, "read enforcement modes; every rule denies until they can be read")
	}
	if err := l.syncPolicies(ctx, r); err != nil {
		log.Error(err, "read policy ConfigMaps; loading the shipped policies alone")
	}
	if l.Engine.Ready() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loadShipped(ctx)
}

// Reconcile implements reconcile.Reconciler. Whatever changed, it reloads
// the modes (for the modes ConfigMap) and the whole policy set, which is a
// no-op when its revision is active already or failed before.
func (l *PolicyLoader) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Namespace != l.Namespace {
		return ctrl.Result{}, nil
	}
	if req.Name == policy.ModesConfigMapName {
		if err := l.syncModes(ctx, l.reader()); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, l.syncPolicies(ctx, l.reader())
}

func (l *PolicyLoader) reader() client.Reader {
	if l.Reader != nil {
		return l.Reader
	}
	return l.Client
}

func (l *PolicyLoader) metrics() *Metrics {
	if l.Metrics != nil {
		return l.Metrics
	}
	return DefaultMetrics()
}

// syncPolicies loads the shipped modules merged with the policy
// ConfigMaps', read through r. It returns an error only when the ConfigMaps
// cannot be read.
func (l *PolicyLoader) syncPolicies(ctx context.Context, r client.Reader) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	log := logf.FromContext(ctx).WithName("policy-loader")
	cms, err := ListPolicyConfigMaps(ctx, r, l.Namespace)
	if err != nil {
		return err
	}
	operator, owners := OperatorModules(cms)
	modules := Merge(ShippedModules(), operator)
	rev := Revision(modules)
	if rev == l.Engine.Revision() || rev == l.failed {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(owners)) {
		if len(owners[name]) > 1 {
			log.Info("policy module defined by several ConfigMaps; the last by name wins", "module", name, "configMaps", owners[name])
		}
	}
	previous := l.Engine.Revision()
	lctx, cancel := context.WithTimeout(ctx, policyLoadTimeout)
	defer cancel()
	if _, err := l.Engine.Load(lctx, modules); err != nil {
		if ctx.Err() != nil {
			return nil // shutting down
		}
		l.failed = rev
		l.metrics().LoadFailed()
		kept := previous
		if kept == "" {
			kept = "none"
		}
		log.Error(err, "policy set did not load; keeping the previous one", "revision", rev, "active", kept)
		l.report(cms, failedConfigMaps(cms, owners, err), corev1.EventTypeWarning, ReasonPolicyLoadFailed,
			fmt.Sprintf("policy set %s not loaded, %s stays active: %v", rev, kept, err))
		if !l.Engine.Ready() {
			return l.loadShipped(ctx)
		}
		return nil
	}
	l.failed = ""
	l.metrics().SetRevision(rev)
	l.changed()
	log.Info("policy set loaded", "revision", rev, "modules", len(modules), "fromConfigMaps", len(operator))
	for i := range cms {
		own := 0
		for _, m := range operator {
			if o := owners[m.Name]; o[len(o)-1] == cms[i].Name {
				own++
			}
		}
		l.event(&cms[i], corev1.EventTypeNormal, ReasonPolicyLoaded,
			fmt.Sprintf("policy set %s active: %d modules, %d of them from this ConfigMap", rev, len(modules), own))
	}
	return nil
}

// loadShipped makes the shipped modules alone the active set. l.mu is held.
func (l *PolicyLoader) loadShipped(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, policyLoadTimeout)
	defer cancel()
	rev, err := l.Engine.Load(lctx, ShippedModules())
	if err != nil {
		l.metrics().LoadFailed()
		return fmt.Errorf("load the shipped policies: %w", err)
	}
	l.metrics().SetRevision(rev)
	logf.FromContext(ctx).WithName("policy-loader").Info("shipped policy set loaded", "revision", rev)
	return nil
}

// syncModes reads the modes ConfigMap through r into l.Modes; a missing one
// means every rule denies. Modes that do not parse leave the previous ones.
func (l *PolicyLoader) syncModes(ctx context.Context, r client.Reader) error {
	if l.Modes == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var cm corev1.ConfigMap
	err := r.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: policy.ModesConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		if old := l.Modes.Load(); old == nil || len(*old) > 0 {
			l.Modes.Store(&policy.Modes{})
			l.changed()
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", policy.ModesConfigMapName, err)
	}
	modes, err := policy.ParseModes(cm.Data)
	if err != nil {
		logf.FromContext(ctx).WithName("policy-loader").Error(err, "enforcement modes do not parse; keeping the previous ones")
		l.event(&cm, corev1.EventTypeWarning, ReasonPolicyConfigInvalid, fmt.Sprintf("enforcement modes not changed: %v", err))
		return nil
	}
	if old := l.Modes.Load(); old != nil && maps.Equal(*old, modes) {
		return nil
	}
	l.Modes.Store(&modes)
	l.changed()
	l.event(&cm, corev1.EventTypeNormal, ReasonPolicyConfigLoaded, "enforcement modes: "+modes.String())
	return nil
}

// changed tells OnChange that the active set or modes changed.
func (l *PolicyLoader) changed() {
	if l.OnChange != nil {
		l.OnChange()
	}
}

// report records an event on each ConfigMap in targets, or on all of cms
// when targets is empty.
func (l *PolicyLoader) report(cms []corev1.ConfigMap, targets map[string]bool, eventType, reason, note string) {
	for i := range cms {
		if len(targets) == 0 || targets[cms[i].Name] {
			l.event(&cms[i], eventType, reason, note)
		}
	}
}

func (l *PolicyLoader) event(cm *corev1.ConfigMap, eventType, reason, note string) {
	if l.Recorder == nil {
		return
	}
	l.Recorder.Eventf(cm, nil, eventType, reason, "LoadPolicy", "%s", truncateNote(note))
}

// truncateNote cuts note to the longest an Event may carry.
func truncateNote(note string) string {
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote-len("…")], "") + "…"
	}
	return note
}

// failedConfigMaps names the ConfigMaps whose modules the error is in.
func failedConfigMaps(cms []corev1.ConfigMap, owners map[string][]string, err error) map[string]bool {
	var pe *PolicyError
	if !errors.As(err, &pe) {
		return nil
	}
	out := map[string]bool{}
	for _, f := range pe.Files() {
		if names := owners[f]; len(names) > 0 {
			out[names[len(names)-1]] = true
		}
	}
	return out
}

// ListPolicyConfigMaps lists the ConfigMaps labelled virtstation.io/policy=true
// in namespace, sorted by name.
func ListPolicyConfigMaps(ctx context.Context, r client.Reader, namespace string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{api.LabelPolicy: api.LabelTrue}); err != nil {
		return nil, fmt.Errorf("list policy ConfigMaps in %s: %w", namespace, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// OperatorModules returns the modules of the policy ConfigMaps (in the
// given order, keys sorted): every data key ending in .rego. owners maps
// each module name to the ConfigMaps defining it, in order; the last one's
// module is the one returned.
func OperatorModules(cms []corev1.ConfigMap) (modules []Module, owners map[string][]string) {
	owners = map[string][]string{}
	index := map[string]int{}
	for _, cm := range cms {
		keys := slices.Sorted(maps.Keys(cm.Data))
		for _, k := range keys {
			if !strings.HasSuffix(k, ".rego") {
				continue
			}
			m := Module{Name: k, Source: cm.Data[k], ConfigMap: client.ObjectKeyFromObject(&cm)}
			if i, ok := index[k]; ok {
				modules[i] = m
			} else {
				index[k] = len(modules)
				modules = append(modules, m)
			}
			owners[k] = append(owners[k], cm.Name)
		}
	}
	return modules, owners
}
