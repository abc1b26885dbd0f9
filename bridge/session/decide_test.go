package session

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 3, 4, 10, 2, 0, 0, time.UTC)

// lease builds a session Lease held by holder for user, renewed at renewed
// for 15 s.
func lease(holder, user string, renewed time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "vs-console-x", Annotations: map[string]string{annUser: user}},
		Spec: coordinationv1.LeaseSpec{
			AcquireTime:          ptr.To(metav1.NewMicroTime(renewed.Add(-time.Minute))),
			RenewTime:            ptr.To(metav1.NewMicroTime(renewed)),
			LeaseDurationSeconds: ptr.To(int32(15)),
		},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

func TestDecide(t *testing.T) {
	fresh, stale := t0.Add(-5*time.Second), t0.Add(-16*time.Second)
	tests := map[string]struct {
		lease *coordinationv1.Lease
		want  verdict
	}{
		"no lease: free":                        {lease: nil, want: vacant},
		"released (no holder)":                  {lease: lease("", "", fresh), want: vacant},
		"held by a live session":                {lease: lease("a/s1", "alice", fresh), want: occupied},
		"held by the requester's own session":   {lease: lease("a/s1", "bob", fresh), want: occupied},
		"expired session":                       {lease: lease("a/s1", "alice", stale), want: vacant},
		"renewed exactly a duration ago":        {lease: lease("a/s1", "alice", t0.Add(-15*time.Second)), want: occupied},
		"reserved for the requester":            {lease: lease("reserved/bob", "bob", fresh), want: reservedForRequester},
		"reserved for another user":             {lease: lease("reserved/carol", "carol", fresh), want: occupied},
		"reservation expired":                   {lease: lease("reserved/carol", "carol", stale), want: vacant},
		"expired reservation for the requester": {lease: lease("reserved/bob", "bob", stale), want: vacant},
		"malformed holder counts as held":       {lease: lease("garbage", "", fresh), want: occupied},
		"no renew time: acquire time counts": {lease: func() *coordinationv1.Lease {
			l := lease("a/s1", "alice", fresh)
			l.Spec.RenewTime, l.Spec.AcquireTime = nil, ptr.To(metav1.NewMicroTime(fresh))
			return l
		}(), want: occupied},
		"no times at all: cannot be held": {lease: func() *coordinationv1.Lease {
			l := lease("a/s1", "alice", fresh)
			l.Spec.RenewTime, l.Spec.AcquireTime = nil, nil
			return l
		}(), want: vacant},
		"no duration: cannot be held": {lease: func() *coordinationv1.Lease {
			l := lease("a/s1", "alice", fresh)
			l.Spec.LeaseDurationSeconds = nil
			return l
		}(), want: vacant},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := decide(tc.lease, holderState{}, t0, "bob"); got != tc.want {
				t.Errorf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

// keptLease builds a session Lease of the heartbeat layout held by holder
// for user, kept by incarnation inc of its replica's heartbeat; its own
// times are long past.
func keptLease(holder, user, inc string) *coordinationv1.Lease {
	l := lease(holder, user, t0.Add(-time.Hour))
	l.Annotations[annIncarnation] = inc
	return l
}

// beat builds replica's heartbeat Lease in incarnation inc, renewed at
// renewed for 15 s.
func beat(replica, inc string, renewed time.Time) *coordinationv1.Lease {
	return heartbeatLease(nil, "bridge", replica, inc, renewed.Add(-time.Hour), renewed, 15*time.Second)
}

func TestDecideWithHeartbeats(t *testing.T) {
	fresh, stale := t0.Add(-5*time.Second), t0.Add(-16*time.Second)
	tests := map[string]struct {
		lease *coordinationv1.Lease
		hs    holderState
		want  verdict
	}{
		"replica's heartbeat is fresh: held, whatever the session's own times": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("a", "i1", fresh)}, want: occupied},
		"heartbeat renewed exactly a duration ago": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("a", "i1", t0.Add(-15*time.Second))}, want: occupied},
		"replica's heartbeat is stale: vacant": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("a", "i1", stale)}, want: vacant},
		"replica has no heartbeat: vacant": {
			lease: keptLease("a/s1", "alice", "i1"), want: vacant},
		"replica restarted (another incarnation): vacant": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("a", "i2", fresh)}, want: vacant},
		"heartbeat of another replica (hash collision): vacant": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("b", "i1", fresh)}, want: vacant},
		"session ended on the deciding replica, release queued: vacant": {
			lease: keptLease("a/s1", "alice", "i1"), hs: holderState{heartbeat: beat("a", "i1", fresh), ended: true}, want: vacant},
		"released": {
			lease: releasedLease(keptLease("a/s1", "alice", "i1")), hs: holderState{heartbeat: beat("a", "i1", fresh)}, want: vacant},
		"per-session layout (rolling upgrade) renewed in time: held without a heartbeat": {
			lease: lease("old/s1", "alice", fresh), want: occupied},
		"per-session layout expired: vacant even with a fresh heartbeat": {
			lease: lease("old/s1", "alice", stale), hs: holderState{heartbeat: beat("old", "i1", fresh)}, want: vacant},
		"reservation counts its own TTL, not a heartbeat": {
			lease: lease("reserved/carol", "carol", fresh), want: occupied},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := decide(tc.lease, tc.hs, t0, "bob"); got != tc.want {
				t.Errorf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHeartbeatLease(t *testing.T) {
	got := heartbeatLease(nil, "bridge", "bridge-7f9c-x2", "i1", t0.Add(-time.Minute), t0, 15*time.Second)
	if got.Name != heartbeatName("bridge-7f9c-x2") || got.Namespace != "bridge" || !strings.HasPrefix(got.Name, "vs-replica-") {
		t.Errorf("lease %s/%s", got.Namespace, got.Name)
	}
	if got.Labels[labelManagedBy] != managedByBridge || got.Labels[labelRole] != roleHeartbeat || got.Labels[labelVM] != "" {
		t.Errorf("labels %v", got.Labels)
	}
	if holderIdentity(got) != "bridge-7f9c-x2" || got.Annotations[annReplica] != "bridge-7f9c-x2" || got.Annotations[annIncarnation] != "i1" {
		t.Errorf("holder %q, annotations %v", holderIdentity(got), got.Annotations)
	}
	if _, ok := parseHolder(holderIdentity(got)); ok {
		t.Error("a heartbeat's holder parses as a session's")
	}
	if !replicaAlive(got, "bridge-7f9c-x2", "i1", t0.Add(15*time.Second)) || replicaAlive(got, "bridge-7f9c-x2", "i1", t0.Add(16*time.Second)) {
		t.Error("the heartbeat does not last exactly its duration")
	}
	renewed := heartbeatLease(got, "bridge", "bridge-7f9c-x2", "i1", t0.Add(-time.Minute), t0.Add(5*time.Second), 15*time.Second)
	restarted := heartbeatLease(renewed, "bridge", "bridge-7f9c-x2", "i2", t0.Add(6*time.Second), t0.Add(6*time.Second), 15*time.Second)
	if n := ptr.Deref(renewed.Spec.LeaseTransitions, 0); n != 0 {
		t.Errorf("a renewal counts as %d transitions", n)
	}
	if n := ptr.Deref(restarted.Spec.LeaseTransitions, 0); n != 1 {
		t.Errorf("a new incarnation counts as %d transitions, want 1", n)
	}
}

func TestHolderOf(t *testing.T) {
	since := t0.Add(-time.Minute)
	tests := map[string]struct {
		lease *coordinationv1.Lease
		want  Holder
	}{
		"session":     {lease: lease("replica-a/s1", "alice", t0), want: Holder{User: "alice", Since: since, Replica: "replica-a"}},
		"reservation": {lease: lease("reserved/bob", "bob", t0), want: Holder{User: "bob", Since: since, Reserved: true}},
		"reservation names the user, whatever the annotation says": {
			lease: lease("reserved/bob", "", t0), want: Holder{User: "bob", Since: since, Reserved: true}},
		"malformed holder": {lease: lease("garbage", "alice", t0), want: Holder{User: "alice", Since: since}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := holderOf(tc.lease); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("holderOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLostReason(t *testing.T) {
	takenOver := func(l *coordinationv1.Lease, from string) *coordinationv1.Lease {
		l.Annotations[annTakenOverFrom] = from
		return l
	}
	tests := map[string]struct {
		lease *coordinationv1.Lease
		want  error
	}{
		"reserved by a take-over of us": {lease: takenOver(lease("reserved/bob", "bob", t0), "a/s1"), want: TakenOver{By: "bob"}},
		"taken over by a new session":   {lease: takenOver(lease("b/s2", "bob", t0), "a/s1"), want: TakenOver{By: "bob"}},
		"taken over from someone else":  {lease: takenOver(lease("b/s3", "carol", t0), "b/s2"), want: ErrExpired},
		"taken after we expired":        {lease: lease("b/s2", "bob", t0), want: ErrExpired},
		"released by someone else":      {lease: lease("", "", t0), want: ErrExpired},
		"deleted":                       {lease: nil, want: ErrExpired},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := lostReason(tc.lease, "a/s1"); !errors.Is(got, tc.want) {
				t.Errorf("lostReason = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClaimLease(t *testing.T) {
	k := Key{Namespace: "team-a", Name: "ws-1", Mode: "vnc"}
	withTransitions := func(l *coordinationv1.Lease, n int32, takenOverFrom string) *coordinationv1.Lease {
		l.Spec.LeaseTransitions = ptr.To(n)
		if takenOverFrom != "" {
			l.Annotations[annTakenOverFrom] = takenOverFrom
		}
		return l
	}
	tests := map[string]struct {
		cur               *coordinationv1.Lease
		holder            holderID
		v                 verdict
		wantTransitions   int32
		wantTakenOverFrom string
	}{
		"new lease": {
			holder: holderID{Replica: "b", Session: "s2"}, v: vacant, wantTransitions: 0},
		"vacant slot clears an old take-over": {
			cur:    withTransitions(lease("", "", t0), 3, "a/s0"),
			holder: holderID{Replica: "b", Session: "s2"}, v: vacant, wantTransitions: 4},
		"take-over records the displaced session": {
			cur:    withTransitions(lease("a/s1", "alice", t0), 1, ""),
			holder: holderID{ReservedFor: "bob"}, v: occupied, wantTransitions: 2, wantTakenOverFrom: "a/s1"},
		"acquiring a reservation keeps the take-over record": {
			cur:    withTransitions(lease("reserved/bob", "bob", t0), 2, "a/s1"),
			holder: holderID{Replica: "b", Session: "s2"}, v: reservedForRequester, wantTransitions: 3, wantTakenOverFrom: "a/s1"},
		"taking over a reservation keeps the first take-over record": {
			cur:    withTransitions(lease("reserved/bob", "bob", t0), 2, "a/s1"),
			holder: holderID{ReservedFor: "carol"}, v: occupied, wantTransitions: 3, wantTakenOverFrom: "a/s1"},
		"reserving again for the same user is no transition": {
			cur:    withTransitions(lease("reserved/bob", "bob", t0), 2, "a/s1"),
			holder: holderID{ReservedFor: "bob"}, v: reservedForRequester, wantTransitions: 2, wantTakenOverFrom: "a/s1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inc := ""
			if tc.holder.ReservedFor == "" {
				inc = "inc1"
			}
			got := claimLease(tc.cur, "bridge", k, tc.holder, inc, "bob", t0, 15*time.Second, tc.v)
			if got.Annotations[annIncarnation] != inc {
				t.Errorf("incarnation %q, want %q", got.Annotations[annIncarnation], inc)
			}
			if tc.cur == nil && (got.Name != leaseName(k) || got.Namespace != "bridge") {
				t.Errorf("lease %s/%s, want bridge/%s", got.Namespace, got.Name, leaseName(k))
			}
			if h := holderIdentity(got); h != tc.holder.String() {
				t.Errorf("holder %q, want %q", h, tc.holder)
			}
			if n := ptr.Deref(got.Spec.LeaseTransitions, 0); n != tc.wantTransitions {
				t.Errorf("leaseTransitions %d, want %d", n, tc.wantTransitions)
			}
			if from := got.Annotations[annTakenOverFrom]; from != tc.wantTakenOverFrom {
				t.Errorf("taken-over-from %q, want %q", from, tc.wantTakenOverFrom)
			}
			wantAnn := map[string]string{annNamespace: "team-a", annName: "ws-1", annMode: "vnc", annUser: "bob"}
			for key, want := range wantAnn {
				if got.Annotations[key] != want {
					t.Errorf("annotation %s = %q, want %q", key, got.Annotations[key], want)
				}
			}
			if got.Labels[labelManagedBy] != managedByBridge || got.Labels[labelVM] != vmHash("team-a", "ws-1") {
				t.Errorf("labels %v", got.Labels)
			}
			if !got.Spec.AcquireTime.Equal(ptr.To(metav1.NewMicroTime(t0))) || !got.Spec.RenewTime.Equal(ptr.To(metav1.NewMicroTime(t0))) {
				t.Errorf("acquireTime %v, renewTime %v, want both %v", got.Spec.AcquireTime, got.Spec.RenewTime, t0)
			}
			if d := ptr.Deref(got.Spec.LeaseDurationSeconds, 0); d != 15 {
				t.Errorf("leaseDurationSeconds %d, want 15", d)
			}
		})
	}
}

func TestReleasedLease(t *testing.T) {
	l := lease("a/s1", "alice", t0)
	l.Annotations[annTakenOverFrom] = "b/s0"
	got := releasedLease(l)
	if decide(got, holderState{}, t0, "carol") != vacant {
		t.Errorf("released lease is not vacant: %+v", got.Spec)
	}
	if _, ok := got.Annotations[annUser]; ok {
		t.Errorf("released lease still names a user: %v", got.Annotations)
	}
	if holderIdentity(l) != "a/s1" {
		t.Errorf("releasedLease changed its argument")
	}
}
