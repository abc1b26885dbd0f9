package activity

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
)

// The activity Lease's managed-by label: the session package's value, so
// that every Lease the bridge writes carries it.
const (
	labelManagedBy  = "app.kubernetes.io/managed-by"
	managedByBridge = "virtstation-bridge"
)

// SourceKeepRunning is spec.holderIdentity after a keep-running lease.
const SourceKeepRunning = "bridge keep-running"

// Source is spec.holderIdentity for input in a session of mode (console,
// vnc, ssh): "bridge vnc input".
func Source(mode string) string { return "bridge " + mode + " input" }

// verdict is what a write of input makes of the Lease as read.
type verdict int

const (
	// create the Lease: there is none.
	create verdict = iota
	// update the Lease with the resourceVersion read.
	update
	// recent: the Lease was written within the interval of the input;
	// leave it.
	recent
)

// decide says whether input at at should be written over cur (nil: no
// Lease), and when cur was last written (zero: never).
func decide(cur *coordinationv1.Lease, at time.Time, interval time.Duration) (verdict, time.Time) {
	if cur == nil {
		return create, time.Time{}
	}
	last := renewTime(cur)
	if !last.IsZero() && at.Sub(last) < interval {
		return recent, last
	}
	return update, last
}

// renewTime is the Lease's spec.renewTime, zero when unset.
func renewTime(l *coordinationv1.Lease) time.Time {
	if l == nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// activityLease is cur (nil: a new Lease of vm in namespace) recording
// activity from source at at. It never moves renewTime back: a later
// activity in cur stays, source and all.
func activityLease(cur *coordinationv1.Lease, namespace string, vm types.NamespacedName, at time.Time, source string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: api.ActivityLeaseName(vm.Namespace, vm.Name)}}
	if cur != nil {
		l = cur.DeepCopy()
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[labelManagedBy] = managedByBridge
	l.Labels[api.LabelRole] = api.RoleActivity
	l.Labels[api.LabelVM] = api.VMHash(vm.Namespace, vm.Name)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[api.AnnotationVMNamespace] = vm.Namespace
	l.Annotations[api.AnnotationVMName] = vm.Name
	if at.After(renewTime(cur)) {
		l.Spec.RenewTime = &metav1.MicroTime{Time: at}
		l.Spec.HolderIdentity = &source
	}
	return l
}

// keepRunningLease is cur (nil: a new Lease) with a keep-running lease
// user took at now until until, which counts as activity at now too.
func keepRunningLease(cur *coordinationv1.Lease, namespace string, vm types.NamespacedName, user string, now, until time.Time) *coordinationv1.Lease {
	l := activityLease(cur, namespace, vm, now, SourceKeepRunning)
	l.Annotations[api.AnnotationKeepRunningUntil] = until.UTC().Format(time.RFC3339)
	l.Annotations[api.AnnotationKeepRunningAt] = now.UTC().Format(time.RFC3339)
	l.Annotations[api.AnnotationKeepRunningBy] = user
	return l
}

// heldUntil is the keep-running lease cur already records, when it was
// taken less than interval before now and taking one until until would
// extend it by less than interval: that request writes nothing (a user
// clicking "Keep running" again and again costs one write per interval),
// and the lease held is the answer. An older lease is always written
// anew: a lower max-keep-running set since may cap it shorter than it says.
func heldUntil(cur *coordinationv1.Lease, now, until time.Time, interval time.Duration) (time.Time, bool) {
	if cur == nil {
		return time.Time{}, false
	}
	held, err := time.Parse(time.RFC3339, cur.Annotations[api.AnnotationKeepRunningUntil])
	if err != nil || !held.Add(interval).After(until) {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, cur.Annotations[api.AnnotationKeepRunningAt])
	if err != nil || !at.Add(interval).After(now) {
		return time.Time{}, false
	}
	return held, true
}

// LeaseVM is the VM an activity Lease is about; ok is false for any other
// Lease, or one whose name does not match its annotations (not the
// bridge's).
func LeaseVM(l *coordinationv1.Lease) (vm types.NamespacedName, ok bool) {
	if l.Labels[api.LabelRole] != api.RoleActivity {
		return vm, false
	}
	vm = types.NamespacedName{Namespace: l.Annotations[api.AnnotationVMNamespace], Name: l.Annotations[api.AnnotationVMName]}
	if vm.Namespace == "" || vm.Name == "" || l.Name != api.ActivityLeaseName(vm.Namespace, vm.Name) {
		return types.NamespacedName{}, false
	}
	return vm, true
}

// Selector selects the activity Leases, for the janitor.
const Selector = api.LabelRole + "=" + api.RoleActivity
