package session_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/virtstation/virtstation/bridge/session"
)

var console = session.Key{Namespace: "team-a", Name: "ws-1", Mode: "console"}

// mustAcquire acquires k for user or fails the test.
func mustAcquire(t *testing.T, r *session.Registry, k session.Key, user string) *session.Session {
	t.Helper()
	s, err := r.Acquire(t.Context(), k, user)
	if err != nil {
		t.Fatalf("%s acquires %s: %v", user, k, err)
	}
	return s
}

// refused acquires k for user, expects a HeldError and returns its holder.
func refused(t *testing.T, r *session.Registry, k session.Key, user string) session.Holder {
	t.Helper()
	s, err := r.Acquire(t.Context(), k, user)
	var held *session.HeldError
	if !errors.As(err, &held) || !errors.Is(err, session.ErrHeld) {
		if s != nil {
			_ = s.Release(t.Context())
		}
		t.Fatalf("%s acquires %s: err = %v, want a HeldError", user, k, err)
	}
	return held.Holder
}

// lostWithin waits up to d for s to be lost and returns how long that took
// and the reason.
func lostWithin(t *testing.T, s *session.Session, d time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	select {
	case <-s.Lost():
		return time.Since(start), s.LostReason()
	case <-time.After(d):
		t.Fatalf("%s of %s still held after %v", s.Key, s.User, d)
		return 0, nil
	}
}

// stillHeld fails the test if s was lost.
func stillHeld(t *testing.T, s *session.Session) {
	t.Helper()
	if err := s.LostReason(); err != nil {
		t.Fatalf("%s of %s lost: %v", s.Key, s.User, err)
	}
}

func TestSecondAcquireIsRefusedWithTheHolder(t *testing.T) {
	t.Parallel()
	a, b, ns := twoReplicas(t, fast)
	alice := mustAcquire(t, a, console, "alice")

	for name, r := range map[string]*session.Registry{"other replica": b, "same replica": a} {
		t.Run(name, func(t *testing.T) {
			h := refused(t, r, console, "bob")
			want := session.Holder{User: "alice", Since: alice.Since, Replica: "a"}
			if !reflect.DeepEqual(h, want) {
				t.Errorf("holder = %+v, want %+v", h, want)
			}
			_, err := r.Acquire(t.Context(), console, "bob")
			if msg := err.Error(); !strings.Contains(msg, "held by alice since "+alice.Since.UTC().Format(time.RFC3339)) {
				t.Errorf("error %q does not say who holds the session since when", msg)
			}
		})
	}
	t.Run("the same user from a second tab", func(t *testing.T) { refused(t, b, console, "alice") })

	vnc := console
	vnc.Mode = "vnc"
	bob := mustAcquire(t, b, vnc, "bob")

	got, err := b.List(t.Context(), console.Namespace, console.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := []session.Status{
		{Mode: "console", Holder: session.Holder{User: "alice", Since: alice.Since, Replica: "a"}},
		{Mode: "vnc", Holder: session.Holder{User: "bob", Since: bob.Since, Replica: "b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List = %+v, want %+v", got, want)
	}
	if other, err := b.List(t.Context(), console.Namespace, "ws-2"); err != nil || len(other) != 0 {
		t.Errorf("List of another VM = %+v, %v; want nothing", other, err)
	}

	// An administrator reading the Lease sees whose it is.
	leases, err := admin.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=virtstation-bridge"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range leases.Items {
		if l.Annotations["virtstation.io/mode"] != "console" {
			continue
		}
		found = true
		wantAnn := map[string]string{"virtstation.io/vm-namespace": "team-a", "virtstation.io/vm-name": "ws-1", "virtstation.io/user": "alice"}
		for k, v := range wantAnn {
			if l.Annotations[k] != v {
				t.Errorf("lease %s: annotation %s = %q, want %q", l.Name, k, l.Annotations[k], v)
			}
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "a/"+alice.ID {
			t.Errorf("lease %s: holder %q, want %q", l.Name, h, "a/"+alice.ID)
		}
		if !strings.HasPrefix(l.Name, "vs-console-") || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 2 {
			t.Errorf("lease %s: duration %v", l.Name, l.Spec.LeaseDurationSeconds)
		}
	}
	if !found {
		t.Errorf("no console lease among %d managed leases", len(leases.Items))
	}
	stillHeld(t, alice)
}

func TestTakeOverFromAnotherReplica(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, session.Options{LeaseDuration: 2 * time.Second, ReservationTTL: 5 * time.Second})
	alice := mustAcquire(t, a, console, "alice")

	if err := b.TakeOver(t.Context(), console, "bob"); err != nil {
		t.Fatal(err)
	}
	took, reason := lostWithin(t, alice, 2*time.Second)
	if !reflect.DeepEqual(reason, session.TakenOver{By: "bob"}) {
		t.Fatalf("alice's session lost with %v, want TakenOver{By: bob}", reason)
	}
	t.Logf("replica a noticed the take-over after %v", took)

	// The slot waits for bob: nobody else gets it, not even alice again.
	if h := refused(t, b, console, "carol"); h.User != "bob" || !h.Reserved {
		t.Errorf("carol refused with holder %+v, want a reservation for bob", h)
	}
	refused(t, a, console, "alice")
	if st, _ := a.List(t.Context(), console.Namespace, console.Name); len(st) != 1 || st[0].Holder.User != "bob" || !st[0].Holder.Reserved {
		t.Errorf("List = %+v, want console reserved for bob", st)
	}

	bob := mustAcquire(t, b, console, "bob")
	if h := refused(t, a, console, "carol"); h.User != "bob" || h.Replica != "b" || h.Reserved {
		t.Errorf("carol refused with holder %+v, want bob's session on b", h)
	}
	stillHeld(t, bob)
}

func TestReservationExpires(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, fast)
	if err := a.TakeOver(t.Context(), console, "bob"); err != nil {
		t.Fatal(err)
	}
	refused(t, b, console, "carol")
	// bob never dials: after the reservation's TTL the slot is free.
	deadline := time.Now().Add(fast.ReservationTTL + 2*time.Second)
	for {
		s, err := b.Acquire(t.Context(), console, "carol")
		if err == nil {
			stillHeld(t, s)
			return
		}
		if !errors.Is(err, session.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("carol after bob's reservation ran out: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAcquireTakingOver(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, fast)
	alice := mustAcquire(t, a, console, "alice")

	// Same replica: alice's session ends before the call returns.
	bob, err := a.AcquireTakingOver(t.Context(), console, "bob")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-alice.Lost():
	default:
		t.Fatal("a take-over on the same replica did not end alice's session at once")
	}
	if reason := alice.LostReason(); !reflect.DeepEqual(reason, session.TakenOver{By: "bob"}) {
		t.Errorf("alice's session lost with %v, want TakenOver{By: bob}", reason)
	}

	// Other replica: bob's session ends within moments.
	carol, err := b.AcquireTakingOver(t.Context(), console, "carol")
	if err != nil {
		t.Fatal(err)
	}
	took, reason := lostWithin(t, bob, 2*time.Second)
	if !reflect.DeepEqual(reason, session.TakenOver{By: "carol"}) {
		t.Errorf("bob's session lost with %v, want TakenOver{By: carol}", reason)
	}
	t.Logf("replica a noticed the take-over after %v", took)
	if h := refused(t, a, console, "dave"); h.User != "carol" || h.Replica != "b" {
		t.Errorf("dave refused with holder %+v, want carol on b", h)
	}
	stillHeld(t, carol)
}

func TestReleaseFreesTheSlotAtOnce(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, fast)
	alice := mustAcquire(t, a, console, "alice")
	if err := alice.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(alice.LostReason(), session.ErrReleased) {
		t.Errorf("released session: LostReason = %v, want ErrReleased", alice.LostReason())
	}
	bob := mustAcquire(t, b, console, "bob") // no wait for the lease duration

	t.Run("releasing a session that was taken over leaves the new holder", func(t *testing.T) {
		carol, err := a.AcquireTakingOver(t.Context(), console, "carol")
		if err != nil {
			t.Fatal(err)
		}
		if err := bob.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h := refused(t, b, console, "dave"); h.User != "carol" {
			t.Errorf("dave refused with holder %+v, want carol", h)
		}
		stillHeld(t, carol)
	})
}

func TestLiveHolderKeepsTheSlotPastTheLeaseDuration(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, fast)
	alice := mustAcquire(t, a, console, "alice")
	until := time.Now().Add(2*fast.LeaseDuration + time.Second)
	for time.Now().Before(until) {
		refused(t, b, console, "bob")
		time.Sleep(250 * time.Millisecond)
	}
	stillHeld(t, alice)
}

func TestCrashedReplicaFreesItsSlotsAfterTheLeaseDuration(t *testing.T) {
	t.Parallel()
	ns, client := bridgeNamespace(t)
	a, crash := replica(t, client, ns, "a", fast)
	b, _ := replica(t, client, ns, "b", fast)
	alice := mustAcquire(t, a, console, "alice")
	time.Sleep(fast.LeaseDuration / 2) // at least one heartbeat

	crash()
	if took, _ := lostWithin(t, alice, time.Second); took > time.Second {
		t.Errorf("the stopping replica's session lingered %v", took)
	}
	if _, err := a.Acquire(t.Context(), console, "carol"); err == nil || errors.Is(err, session.ErrHeld) {
		t.Errorf("the stopped replica still hands out sessions: err = %v", err)
	}
	lastRenewal := lastHeartbeat(t, ns, "a")
	expiry := lastRenewal.Add(fast.LeaseDuration)

	refusedBefore := 0
	for {
		s, err := b.Acquire(t.Context(), console, "bob")
		// b decides somewhen during Acquire, which a loaded machine may
		// stretch: the slot must not be had before the expiry, and so
		// Acquire cannot return earlier.
		if got := time.Now(); err == nil {
			if !got.After(expiry) {
				t.Errorf("bob got the slot at %v, before the crashed replica's lease expired at %v", got, expiry)
			}
			if late := time.Since(expiry); late > time.Second {
				t.Errorf("bob got the slot %v after it expired", late)
			}
			stillHeld(t, s)
			break
		}
		if !errors.Is(err, session.ErrHeld) {
			t.Fatal(err)
		}
		refusedBefore++
		if time.Now().After(expiry.Add(2 * time.Second)) {
			t.Fatalf("bob still refused 2s after the crashed replica's lease expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refusedBefore == 0 {
		t.Error("bob was never refused while the crashed replica's lease was live")
	}
}

func TestLeaseDeletedLosesTheSession(t *testing.T) {
	t.Parallel()
	a, _, ns := twoReplicas(t, fast)
	alice := mustAcquire(t, a, console, "alice")
	err := admin.CoordinationV1().Leases(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, reason := lostWithin(t, alice, 2*time.Second); !errors.Is(reason, session.ErrExpired) {
		t.Errorf("lost with %v, want ErrExpired", reason)
	}
}

func TestRaceForOneSlotHasOneWinner(t *testing.T) {
	t.Parallel()
	a, b, _ := twoReplicas(t, fast)
	replicas := []*session.Registry{a, b}
	race := func(t *testing.T) *session.Session {
		const racers = 20
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []*session.Session
			others  []error
		)
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				s, err := replicas[i%2].Acquire(context.Background(), console, fmt.Sprintf("user-%d", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, s)
				case !errors.Is(err, session.ErrHeld):
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 || len(others) > 0 {
			t.Fatalf("%d winners, unexpected errors %v; want exactly one winner and %d HeldErrors", len(winners), others, racers-1)
		}
		return winners[0]
	}
	var first *session.Session
	t.Run("new lease", func(t *testing.T) { first = race(t) })
	if first == nil {
		t.FailNow()
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Run("released lease", func(t *testing.T) { stillHeld(t, race(t)) })
}

// lastHeartbeat is when replica last renewed its heartbeat Lease.
func lastHeartbeat(t *testing.T, ns, replica string) time.Time {
	t.Helper()
	leases, err := admin.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "virtstation.io/role=replica-heartbeat"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if ptr.Deref(l.Spec.HolderIdentity, "") == replica {
			return l.Spec.RenewTime.Time
		}
	}
	t.Fatalf("no heartbeat lease of replica %q among %d", replica, len(leases.Items))
	return time.Time{}
}

// vms returns n keys of mode on distinct VMs.
func vms(n int, mode string) []session.Key {
	keys := make([]session.Key, n)
	for i := range keys {
		keys[i] = session.Key{Namespace: "team-a", Name: fmt.Sprintf("ws-%d", i), Mode: mode}
	}
	return keys
}

// acquireAll acquires every key on r for user, a few at a time.
func acquireAll(t *testing.T, r *session.Registry, keys []session.Key, user string) []*session.Session {
	t.Helper()
	out := make([]*session.Session, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(keys))
	for i, k := range keys {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := r.Acquire(t.Context(), k, user)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", k, err)
				return
			}
			out[i] = s
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// writeCounter counts the Lease writes (create, update) its RoundTripper
// passes on.
type writeCounter struct {
	rt     http.RoundTripper
	writes atomic.Int64
}

func (c *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if (req.Method == http.MethodPut || req.Method == http.MethodPost) && strings.Contains(req.URL.Path, "/leases") {
		c.writes.Add(1)
	}
	return c.rt.RoundTrip(req)
}

func TestManySessionsCostOneWritePerRenewInterval(t *testing.T) {
	t.Parallel()
	ns, cfg := bridgeNamespaceConfig(t)
	counter := &writeCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	r, _ := replica(t, kubernetes.NewForConfigOrDie(cfg), ns, "a", fast)
	const n = 100
	sessions := acquireAll(t, r, vms(n, "vnc"), "alice")

	renew := fast.LeaseDuration / 3
	const window = 3 * time.Second
	before := counter.writes.Load()
	time.Sleep(window)
	writes := counter.writes.Load() - before
	// One heartbeat per interval, whatever the number of sessions; a
	// session-per-Lease renewal would be n per interval.
	if most := int64(window/renew) + 1; writes > most {
		t.Errorf("%d sessions held for %v cost %d Lease writes, want at most %d (one per %v)", n, window, writes, most, renew)
	}
	t.Logf("%d sessions held for %v: %d Lease writes", n, window, writes)
	for _, s := range sessions {
		stillHeld(t, s)
	}
}

func TestStoppedHeartbeatFreesEverySessionAfterTheLeaseDuration(t *testing.T) {
	t.Parallel()
	ns, client := bridgeNamespace(t)
	a, crash := replica(t, client, ns, "a", fast)
	b, _ := replica(t, client, ns, "b", fast)
	keys := vms(30, "console")
	sessions := acquireAll(t, a, keys, "alice")
	time.Sleep(fast.LeaseDuration / 2)

	crash()
	for _, s := range sessions {
		_, _ = lostWithin(t, s, time.Second)
	}
	expiry := lastHeartbeat(t, ns, "a").Add(fast.LeaseDuration)
	for _, k := range keys {
		refused(t, b, k, "bob")
	}
	if time.Now().After(expiry) {
		t.Fatal("the slots were checked too late to see them held")
	}
	time.Sleep(time.Until(expiry) + 100*time.Millisecond)
	for _, s := range acquireAll(t, b, keys, "bob") {
		stillHeld(t, s)
	}
}

func TestMassReleaseLands(t *testing.T) {
	t.Parallel()
	ns, cfg := bridgeNamespaceConfig(t)
	// A tight rate limit, as a replica with many sessions has: the
	// releases must queue, not fail.
	cfg.QPS, cfg.Burst = 20, 20
	a, _ := replica(t, kubernetes.NewForConfigOrDie(cfg), ns, "a", session.Options{LeaseDuration: 30 * time.Second})
	const n = 100
	keys := vms(n, "vnc")
	sessions := acquireAll(t, a, keys, "alice")

	// Every client goes at once, each giving its release a moment only.
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			if err := s.Release(ctx); err != nil {
				t.Errorf("release %s: %v", s.Key, err)
			}
		})
	}
	wg.Wait()

	// This replica counts the slots vacant at once, releases landed or not.
	carol := mustAcquire(t, a, keys[n-1], "carol")

	deadline := time.Now().Add(2 * n * time.Second / 20)
	for {
		leases, err := admin.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "virtstation.io/vm"})
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, l := range leases.Items {
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" && h != "a/"+carol.ID {
				held++
			}
		}
		if held == 0 && len(leases.Items) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Leases still held %v after their release", held, n, 2*n*time.Second/20)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stillHeld(t, carol)
	if h := refused(t, a, keys[n-1], "dave"); h.User != "carol" {
		t.Errorf("dave refused with holder %+v, want carol", h)
	}
}

func TestReleaseAfterTheReplicaStopsStillFreesTheSlot(t *testing.T) {
	t.Parallel()
	ns, client := bridgeNamespace(t)
	a, stop := replica(t, client, ns, "a", session.Options{LeaseDuration: 30 * time.Second})
	b, _ := replica(t, client, ns, "b", fast)
	alice := mustAcquire(t, a, console, "alice")

	// A bridge shutting down: its sessions end, and each one's handler
	// gives its Lease back as it goes.
	stop()
	if _, reason := lostWithin(t, alice, time.Second); !errors.Is(reason, session.ErrExpired) {
		t.Errorf("lost with %v, want ErrExpired", reason)
	}
	if err := alice.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	stillHeld(t, mustAcquire(t, b, console, "bob")) // long before a's heartbeat expires
}
