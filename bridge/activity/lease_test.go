package activity

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/virtstation/virtstation/api"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	written := func(d time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(t0.Add(d)))}}
	}
	for name, tc := range map[string]struct {
		cur  *coordinationv1.Lease
		want verdict
	}{
		"no Lease":                            {cur: nil, want: create},
		"never written":                       {cur: &coordinationv1.Lease{}, want: update},
		"written an interval before":          {cur: written(-time.Minute), want: update},
		"written within the interval":         {cur: written(-59 * time.Second), want: recent},
		"written after the input (a replica)": {cur: written(time.Second), want: recent},
	} {
		t.Run(name, func(t *testing.T) {
			if got, _ := decide(tc.cur, t0, time.Minute); got != tc.want {
				t.Errorf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestActivityLease: the Lease says whose activity it is in the labels
// and annotations the lifecycle controller and the janitor read, keeps
// what others wrote, and never moves renewTime back.
func TestActivityLease(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	vm := types.NamespacedName{Namespace: "team-a", Name: "ws1"}
	l := activityLease(nil, "vs", vm, t0, Source("vnc"))
	if l.Namespace != "vs" || l.Name != api.ActivityLeaseName("team-a", "ws1") {
		t.Fatalf("Lease %s/%s", l.Namespace, l.Name)
	}
	wantLabels := map[string]string{"app.kubernetes.io/managed-by": "virtstation-bridge", api.LabelRole: api.RoleActivity, api.LabelVM: api.VMHash("team-a", "ws1")}
	for k, v := range wantLabels {
		if l.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, l.Labels[k], v)
		}
	}
	if l.Annotations[api.AnnotationVMNamespace] != "team-a" || l.Annotations[api.AnnotationVMName] != "ws1" {
		t.Errorf("annotations %v", l.Annotations)
	}
	if got := *l.Spec.HolderIdentity; got != "bridge vnc input" || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("spec = %q at %v", got, l.Spec.RenewTime)
	}
	if got, ok := LeaseVM(l); !ok || got != vm {
		t.Errorf("LeaseVM = %v, %v", got, ok)
	}

	// A keep-running lease on top keeps the labels and says who and until when.
	until := t0.Add(2 * time.Hour)
	k := keepRunningLease(l, "vs", vm, "alice", t0.Add(time.Minute), until)
	if k.Annotations[api.AnnotationKeepRunningUntil] != "2026-12-06T11:00:00Z" || k.Annotations[api.AnnotationKeepRunningBy] != "alice" ||
		k.Annotations[api.AnnotationKeepRunningAt] != "2026-12-06T09:01:00Z" || *k.Spec.HolderIdentity != SourceKeepRunning {
		t.Errorf("keep-running Lease: %v %q", k.Annotations, *k.Spec.HolderIdentity)
	}
	if l.Annotations[api.AnnotationKeepRunningBy] != "" {
		t.Error("keepRunningLease changed the Lease it was given")
	}

	// Older input over it changes nothing of the activity, and keeps the
	// keep-running lease.
	old := activityLease(k, "vs", vm, t0, Source("console"))
	if *old.Spec.HolderIdentity != SourceKeepRunning || !old.Spec.RenewTime.Time.Equal(t0.Add(time.Minute)) || old.Annotations[api.AnnotationKeepRunningBy] != "alice" {
		t.Errorf("older input moved the Lease: %q at %v, %v", *old.Spec.HolderIdentity, old.Spec.RenewTime, old.Annotations)
	}

	// A Lease whose name does not match its annotations is not an activity record.
	forged := l.DeepCopy()
	forged.Annotations[api.AnnotationVMName] = "other"
	if _, ok := LeaseVM(forged); ok {
		t.Error("LeaseVM accepted a Lease named for another VM")
	}
}

// TestHeldUntil: a keep-running request within the interval of the last
// one that would extend its lease by less than the interval writes nothing
// and answers with the lease held.
func TestHeldUntil(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	holding := func(until, at string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			api.AnnotationKeepRunningUntil: until, api.AnnotationKeepRunningAt: at,
		}}}
	}
	const justNow = "2026-12-06T08:59:30Z"
	for name, tc := range map[string]struct {
		cur   *coordinationv1.Lease
		until time.Time
		write bool
	}{
		"no Lease":                                   {cur: nil, until: t0, write: true},
		"no lease held":                              {cur: &coordinationv1.Lease{}, until: t0, write: true},
		"a lease that does not parse":                {cur: holding("tomorrow", justNow), until: t0, write: true},
		"the same again":                             {cur: holding("2026-12-06T09:00:00Z", justNow), until: t0, write: false},
		"extends it by 59s":                          {cur: holding("2026-12-06T09:00:00Z", justNow), until: t0.Add(59 * time.Second), write: false},
		"extends it by the interval":                 {cur: holding("2026-12-06T09:00:00Z", justNow), until: t0.Add(time.Minute), write: true},
		"shorter than the lease just taken":          {cur: holding("2026-12-06T17:00:00Z", justNow), until: t0, write: false},
		"shorter than a lease taken an interval ago": {cur: holding("2026-12-06T17:00:00Z", "2026-12-06T08:59:00Z"), until: t0, write: true},
		"a lease taken at an unknown time":           {cur: holding("2026-12-06T17:00:00Z", ""), until: t0, write: true},
		"an hour past the lease held":                {cur: holding("2026-12-06T08:00:00Z", justNow), until: t0, write: true},
	} {
		t.Run(name, func(t *testing.T) {
			held, ok := heldUntil(tc.cur, t0, tc.until, time.Minute)
			if ok == tc.write {
				t.Fatalf("heldUntil = %v, %v; want a write: %v", held, ok, tc.write)
			}
			if ok && held.Format(time.RFC3339) != tc.cur.Annotations[api.AnnotationKeepRunningUntil] {
				t.Errorf("answered %v, want the lease held %s", held, tc.cur.Annotations[api.AnnotationKeepRunningUntil])
			}
		})
	}
}
