package audit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// DefaultInterval is how often each namespace is audited again when nothing
// it watches changed. Changes to VMs, labelled disks, policies and modes
// are audited at once; the interval catches what no watch sees (a VMI that
// started using a disk, a claim that lapsed, a policy reading a VM's
// status).
const DefaultInterval = 10 * time.Minute

// Auditor is the audit's reconciler. Its requests name a namespace
// (Request.Name; Namespace is empty). Safe for concurrent use.
type Auditor struct {
	// Reader reads VMs, VMIs, disks and reports; normally the cache.
	Reader client.Reader
	// Client writes the reports.
	Client client.Client
	// APIReader reads a report from the API server when the cache's copy
	// disagrees with what the audit last wrote.
	APIReader client.Reader
	// Engine and Modes are the validating webhook's.
	Engine *validate.Engine
	Modes  *atomic.Pointer[policy.Modes]
	// Snapshots read the disk state as the validating webhook does.
	Snapshots validate.Snapshotter
	// Kinds are the report kinds to write (policyreport.WGPolicy,
	// policyreport.OpenReports); none writes no report, but the metrics and
	// Events stay.
	Kinds []schema.GroupVersionKind
	// Recorder records the Events on VMs; nil records none.
	Recorder events.EventRecorder
	// Metrics; nil means DefaultMetrics().
	Metrics *Metrics
	// Interval is how often a namespace is audited again; 0 means
	// DefaultInterval.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// policyChanged wakes the controller when the policy set or modes
	// changed (PolicyChanged).
	policyChanged chan event.GenericEvent

	mu sync.Mutex
	// namespaces holds what the last audit of each namespace found.
	namespaces map[string]*namespaceState
}

// namespaceState is what the last audit of a namespace found and wrote.
type namespaceState struct {
	// vms are the last evaluations, by VM UID.
	vms map[string]judged
	// results are the namespace's last results, stamped.
	results []policyreport.Result
	// loaded: results holds a previous audit's results (from this process,
	// or read back from the reports after a restart).
	loaded bool
	// written are the resourceVersions of the reports as the audit last
	// wrote (or found) them, by kind and name.
	written map[reportKey]string
}

// Reconcile audits the namespace req.Name.
func (a *Auditor) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	if !a.Engine.Ready() {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	start := time.Now()
	defer func() { a.metrics().duration.Observe(time.Since(start).Seconds()) }()

	ps := a.policyState()
	var vms kubevirtv1.VirtualMachineList
	// The audit only reads the cached objects: no copies.
	if err := a.Reader.List(ctx, &vms, client.InNamespace(ns), client.MatchingLabels{api.LabelManaged: api.LabelTrue}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list managed VMs: %w", err)
	}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if len(vms.Items) > 0 {
		if err := a.Reader.List(ctx, &vmis, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return ctrl.Result{}, fmt.Errorf("list VMIs: %w", err)
		}
	}
	state, err := a.state(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := a.now()
	vmsNow := make(map[string]judged, len(vms.Items))
	var results []policyreport.Result
	evaluated := 0
	for i := range vms.Items {
		vm := &vms.Items[i]
		if vm.DeletionTimestamp != nil {
			// The webhook admits whatever a VM on its way out does.
			continue
		}
		j, fresh, err := a.evaluateVM(ctx, vm, vmis.Items, ps, state.vms[string(vm.UID)], now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if fresh {
			evaluated++
		}
		vmsNow[string(vm.UID)] = j
		results = append(results, j.results...)
	}
	a.metrics().audited.Add(float64(len(vmsNow)))
	a.metrics().evaluated.Add(float64(evaluated))

	policyreport.Stamp(results, state.results, now)
	if state.loaded {
		a.recordTransitions(state.results, results)
	}
	reports := policyreport.Build(ns, results)
	if err := a.syncReports(ctx, ns, state, reports); err != nil {
		return ctrl.Result{}, err
	}
	a.metrics().setViolations(ns, results)
	a.mu.Lock()
	state.vms, state.results, state.loaded = vmsNow, results, true
	if len(vmsNow) == 0 {
		delete(a.namespaces, ns)
	}
	a.mu.Unlock()
	logf.FromContext(ctx).V(1).Info("namespace audited", "namespace", ns, "vms", len(vmsNow), "evaluated", evaluated, "reports", len(reports))
	if len(vmsNow) == 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: a.interval()}, nil
}

// policyState is the active policy set and modes.
func (a *Auditor) policyState() policyState {
	ps := policyState{revision: a.Engine.Revision(), rules: a.Engine.Rules(), modes: policy.Modes{}}
	if a.Modes != nil {
		if m := a.Modes.Load(); m != nil {
			ps.modes = *m
		}
	}
	return ps
}

// state returns what the last audit of ns found; after a restart, the
// results are read back from the namespace's reports, so a VM that failed
// before the restart and passes after it gets its Event.
func (a *Auditor) state(ctx context.Context, ns string) (*namespaceState, error) {
	a.mu.Lock()
	if a.namespaces == nil {
		a.namespaces = map[string]*namespaceState{}
	}
	st, ok := a.namespaces[ns]
	a.mu.Unlock()
	if ok {
		return st, nil
	}
	st = &namespaceState{vms: map[string]judged{}, written: map[reportKey]string{}}
	for _, gvk := range a.Kinds {
		existing, err := a.listReports(ctx, ns, gvk)
		if err != nil {
			return nil, err
		}
		if len(existing) == 0 {
			continue
		}
		for _, u := range existing {
			r, err := policyreport.FromObject(&u)
			if err != nil {
				continue // rewritten below
			}
			st.results = append(st.results, r.Results...)
		}
		st.loaded = true
		break
	}
	a.mu.Lock()
	a.namespaces[ns] = st
	a.mu.Unlock()
	return st, nil
}

func (a *Auditor) metrics() *Metrics {
	if a.Metrics != nil {
		return a.Metrics
	}
	return DefaultMetrics()
}

func (a *Auditor) interval() time.Duration {
	if a.Interval > 0 {
		return a.Interval
	}
	return DefaultInterval
}

func (a *Auditor) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}
