package activity_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/internal/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) { shared.Main(m) }

// interval is the tests' activity interval: short, so that several pass.
const interval = time.Second

// namespace makes a namespace for one test's Leases.
func namespace(t *testing.T) (string, kubernetes.Interface) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(shared.Get(t).Config)
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "activity-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name, kube
}

// writes watches the Lease called name and returns what its writes
// (creates and updates) said, once stop is called.
func writes(t *testing.T, kube kubernetes.Interface, ns, name string) (stop func() []coordinationv1.LeaseSpec) {
	t.Helper()
	w, err := kube.CoordinationV1().Leases(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []coordinationv1.LeaseSpec
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mu.Lock()
				got = append(got, l.Spec)
				mu.Unlock()
			}
		}
	}()
	return func() []coordinationv1.LeaseSpec {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// counter counts a Recorder's results.
type counter struct{ m sync.Map }

func (c *counter) count(r activity.Result) {
	v, _ := c.m.LoadOrStore(r, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (c *counter) get(r activity.Result) int64 {
	v, ok := c.m.Load(r)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// TestTwoReplicasWriteOnceAnInterval: two Recorders, as two bridge
// replicas, get continuous input on one VM for several intervals; through
// the real API server, the VM's Lease is written at most once an interval
// between them, and its renewTime follows the input.
func TestTwoReplicasWriteOnceAnInterval(t *testing.T) {
	ns, kube := namespace(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var counts [2]counter
	var recs [2]*activity.Recorder
	for i := range recs {
		recs[i] = activity.New(kube.CoordinationV1(), ns, activity.Options{Interval: interval, Count: counts[i].count})
		go recs[i].Run(ctx)
	}
	stop := writes(t, kube, ns, api.ActivityLeaseName("team-a", "ws1"))

	const d = 5 * interval
	start := time.Now()
	var wg sync.WaitGroup
	for i, src := range []string{activity.Source("console"), activity.Source("vnc")} {
		input := recs[i].For("team-a", "ws1", src)
		wg.Go(func() {
			for time.Since(start) < d {
				input()
				time.Sleep(5 * time.Millisecond) // 200 keys a second
			}
		})
	}
	wg.Wait()
	end := time.Now()
	time.Sleep(interval) // writes in flight land
	got := stop()

	maxWrites := int(math.Ceil(float64(d)/float64(interval))) + 1
	if len(got) > maxWrites || len(got) < 3 {
		t.Fatalf("%d writes of the activity Lease in %v of input at interval %v, want 3 to %d", len(got), d, interval, maxWrites)
	}
	var last time.Time
	for i, s := range got {
		at := s.RenewTime.Time
		if !at.After(last) || at.Before(start) || at.After(end) {
			t.Errorf("write %d: renewTime %v, want after %v, within the input (%v to %v)", i, at, last, start, end)
		}
		if i > 0 && at.Sub(last) < interval {
			t.Errorf("write %d: renewTime %v only %v after the last", i, at, at.Sub(last))
		}
		last = at
	}
	if end.Sub(last) > 2*interval {
		t.Errorf("the last activity recorded is %v, %v before the input ended", last, end.Sub(last))
	}
	written := counts[0].get(activity.Written) + counts[1].get(activity.Written)
	if written != int64(len(got)) {
		t.Errorf("the Recorders counted %d writes, the API server saw %d", written, len(got))
	}
	for _, r := range []activity.Result{activity.Dropped, activity.Error} {
		if n := counts[0].get(r) + counts[1].get(r); n != 0 {
			t.Errorf("%d writes %s", n, r)
		}
	}
}

// TestFullQueueDropsWithoutBlocking: input never waits for the API
// server: with the workers stopped and the queue full, input to further
// VMs returns at once and counts as dropped, and input to them after the
// queue drains is written.
func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	ns, kube := namespace(t)
	var c counter
	rec := activity.New(kube.CoordinationV1(), ns, activity.Options{Interval: interval, QueueSize: 1, Count: c.count})
	begin := time.Now()
	for _, vm := range []string{"a", "b", "c"} {
		rec.Input("team-a", vm, activity.Source("vnc"))
	}
	if took := time.Since(begin); took > 100*time.Millisecond {
		t.Fatalf("input took %v with the queue full", took)
	}
	if n := c.get(activity.Dropped); n != 2 {
		t.Fatalf("%d inputs dropped, want 2 (the queue holds 1)", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go rec.Run(ctx)
	waitFor(t, func() bool { return c.get(activity.Written) == 1 })
	// b was given back to the throttle: its next input is written at once.
	rec.Input("team-a", "b", activity.Source("vnc"))
	waitFor(t, func() bool { return c.get(activity.Written) == 2 })
	for _, vm := range []string{"a", "b"} {
		l, err := kube.CoordinationV1().Leases(ns).Get(t.Context(), api.ActivityLeaseName("team-a", vm), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the activity Lease of %s: %v", vm, err)
		}
		if *l.Spec.HolderIdentity != "bridge vnc input" {
			t.Errorf("%s: holder %q", vm, *l.Spec.HolderIdentity)
		}
	}
}

// TestKeepRunningRecordsTheLease: a keep-running lease is written at once,
// over the activity input wrote, with who and until when, and counts as
// activity.
func TestKeepRunningRecordsTheLease(t *testing.T) {
	ns, kube := namespace(t)
	rec := activity.New(kube.CoordinationV1(), ns, activity.Options{Interval: interval})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go rec.Run(ctx)
	rec.Input("team-a", "ws1", activity.Source("console"))
	name := api.ActivityLeaseName("team-a", "ws1")
	waitFor(t, func() bool {
		_, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	before := time.Now()
	until, err := rec.KeepRunning(ctx, "team-a", "ws1", "alice", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(until); d < 2*time.Hour-time.Minute || d > 2*time.Hour {
		t.Fatalf("kept running until %v, %v from now; want 2h", until, d)
	}
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Annotations[api.AnnotationKeepRunningUntil] != until.Format(time.RFC3339) || l.Annotations[api.AnnotationKeepRunningBy] != "alice" {
		t.Errorf("annotations %v, want until %s by alice", l.Annotations, until.Format(time.RFC3339))
	}
	if l.Spec.RenewTime.Time.Before(before.Add(-time.Second)) || *l.Spec.HolderIdentity != activity.SourceKeepRunning {
		t.Errorf("activity %q at %v, want the keep-running lease's, now", *l.Spec.HolderIdentity, l.Spec.RenewTime)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
