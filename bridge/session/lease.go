package session

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Labels and annotations on a session Lease; see the package comment.
const (
	labelManagedBy   = "app.kubernetes.io/managed-by"
	managedByBridge  = "virtstation-bridge"
	labelVM          = "virtstation.io/vm"
	annNamespace     = "virtstation.io/vm-namespace"
	annName          = "virtstation.io/vm-name"
	annMode          = "virtstation.io/mode"
	annUser          = "virtstation.io/user"
	annVMIUID        = "virtstation.io/vmi-uid"
	annTakenOverFrom = "virtstation.io/taken-over-from"
	// annIncarnation, on a session Lease, names the incarnation of the
	// holding replica's heartbeat that keeps it; on a heartbeat Lease, the
	// replica's current incarnation. A session Lease without it is of the
	// per-session layout, renewed by its own holder.
	annIncarnation = "virtstation.io/incarnation"
	// labelRole marks a replica's heartbeat Lease; annReplica names the
	// replica in plain words.
	labelRole     = "virtstation.io/role"
	roleHeartbeat = "replica-heartbeat"
	annReplica    = "virtstation.io/replica"
)

// managedSelector selects every session Lease.
const managedSelector = labelManagedBy + "=" + managedByBridge

// claimLease returns the Lease that gives k's slot to holder (a session or
// a reservation) for user from now on. cur is the Lease as read (nil when
// there is none) and v what decide made of it. A session's Lease names the
// incarnation of its replica's heartbeat that keeps it, and carries d, the
// lease duration, for readers of the per-session layout; a reservation
// (incarnation "") lasts d from now.
//
// Displacing a live holder (v == occupied) records it in taken-over-from,
// unless it is a reservation, whose own take-over is already recorded there;
// so does taking a reservation made for us. Taking a vacant slot clears it.
func claimLease(cur *coordinationv1.Lease, namespace string, k Key, holder holderID, incarnation, user string, now time.Time, d time.Duration, v verdict) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName(k), Namespace: namespace}}
	if cur != nil {
		l = cur.DeepCopy()
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0))
		if holderIdentity(cur) != holder.String() {
			*l.Spec.LeaseTransitions++
		}
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[labelManagedBy] = managedByBridge
	l.Labels[labelVM] = vmHash(k.Namespace, k.Name)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annNamespace] = k.Namespace
	l.Annotations[annName] = k.Name
	l.Annotations[annMode] = k.Mode
	l.Annotations[annUser] = user
	if k.VMI != "" {
		l.Annotations[annVMIUID] = string(k.VMI)
	}
	if incarnation != "" {
		l.Annotations[annIncarnation] = incarnation
	} else {
		delete(l.Annotations, annIncarnation)
	}
	switch v {
	case vacant:
		delete(l.Annotations, annTakenOverFrom)
	case occupied:
		if prev, _ := parseHolder(holderIdentity(cur)); prev.ReservedFor == "" {
			l.Annotations[annTakenOverFrom] = holderIdentity(cur)
		}
	}
	l.Spec.HolderIdentity = ptr.To(holder.String())
	l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(now))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	l.Spec.LeaseDurationSeconds = ptr.To(int32(d / time.Second))
	return l
}

// heartbeatLease returns the heartbeat Lease of replica in incarnation,
// begun at started and renewed at now, lasting d. cur is the Lease as read
// (nil when there is none); its resourceVersion is kept, so the write is
// conditional on it.
func heartbeatLease(cur *coordinationv1.Lease, namespace, replica, incarnation string, started, now time.Time, d time.Duration) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: heartbeatName(replica), Namespace: namespace}}
	if cur != nil {
		l = cur.DeepCopy()
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0))
		if cur.Annotations[annIncarnation] != incarnation {
			*l.Spec.LeaseTransitions++
		}
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[labelManagedBy] = managedByBridge
	l.Labels[labelRole] = roleHeartbeat
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annReplica] = replica
	l.Annotations[annIncarnation] = incarnation
	l.Spec.HolderIdentity = ptr.To(replica)
	l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(started))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	l.Spec.LeaseDurationSeconds = ptr.To(int32(d / time.Second))
	return l
}

// releasedLease returns l with no holder: the slot is vacant at once.
func releasedLease(l *coordinationv1.Lease) *coordinationv1.Lease {
	l = l.DeepCopy()
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, annUser)
	delete(l.Annotations, annTakenOverFrom)
	delete(l.Annotations, annIncarnation)
	return l
}
