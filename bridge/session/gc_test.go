package session

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const grace = time.Hour
	at := func(d time.Duration) *metav1.MicroTime { return ptr.To(metav1.NewMicroTime(now.Add(-d))) }
	sessionLease := func(holder string, last time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{labelManagedBy: managedByBridge},
				Annotations: map[string]string{annNamespace: "team", annName: "dev"},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), AcquireTime: at(last), RenewTime: at(last)},
		}
	}
	heartbeat := func(last time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelManagedBy: managedByBridge, labelRole: roleHeartbeat}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: at(last)},
		}
	}
	noVM := sessionLease("", time.Minute)
	noVM.Annotations = nil
	otherRole := sessionLease("bridge vnc input", 2*time.Hour)
	otherRole.Labels[labelRole] = "vm-activity"
	for name, tc := range map[string]struct {
		lease *coordinationv1.Lease
		want  Garbage
	}{
		"someone else's Lease":                {lease: &coordinationv1.Lease{}, want: Keep},
		"released session":                    {lease: sessionLease("", time.Minute), want: DeleteIfVMGone},
		"held session, recent":                {lease: sessionLease("replica-1/abc", 5*time.Minute), want: Keep},
		"held session, untouched past grace":  {lease: sessionLease("replica-1/abc", 2*time.Hour), want: DeleteIfVMGone},
		"reservation, untouched past grace":   {lease: sessionLease("reserved/bob", 2*time.Hour), want: DeleteIfVMGone},
		"session Lease naming no VM":          {lease: noVM, want: Keep},
		"another role's Lease of a VM":        {lease: otherRole, want: Keep},
		"live heartbeat":                      {lease: heartbeat(3 * time.Second), want: Keep},
		"heartbeat stopped, within the grace": {lease: heartbeat(50 * time.Minute), want: Keep},
		"heartbeat of a replica long gone":    {lease: heartbeat(2 * time.Hour), want: Delete},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Classify(tc.lease, now, grace); got != tc.want {
				t.Errorf("Classify = %v, want %v", got, tc.want)
			}
		})
	}
}
