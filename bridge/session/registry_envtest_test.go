package session_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	time.Sleep(fast.LeaseDuration / 2) // at least one renewal

	crash()
	if took, _ := lostWithin(t, alice, time.Second); took > time.Second {
		t.Errorf("the stopping replica's session lingered %v", took)
	}
	if _, err := a.Acquire(t.Context(), console, "carol"); err == nil || errors.Is(err, session.ErrHeld) {
		t.Errorf("the stopped replica still hands out sessions: err = %v", err)
	}
	leases, err := admin.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 1 {
		t.Fatalf("leases: %v, %v", leases, err)
	}
	lastRenewal := leases.Items[0].Spec.RenewTime.Time
	expiry := lastRenewal.Add(fast.LeaseDuration)

	refusedBefore := 0
	for {
		before := time.Now()
		s, err := b.Acquire(t.Context(), console, "bob")
		if err == nil {
			if !before.After(lastRenewal.Add(fast.LeaseDuration - 10*time.Millisecond)) {
				t.Errorf("bob got the slot at %v, before the crashed replica's lease expired at %v", before, expiry)
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
