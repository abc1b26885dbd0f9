package session

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Garbage is what a sweep may do with one of the bridge's Leases.
type Garbage int

const (
	// Keep the Lease.
	Keep Garbage = iota
	// DeleteIfVMGone means the Lease is a session slot nobody can be using
	// (released, or unchanged for longer than the grace); delete it once
	// its VM no longer exists.
	DeleteIfVMGone
	// Delete means the Lease is a heartbeat its replica stopped renewing
	// longer than the grace ago (the pod is gone); no session can depend on
	// it.
	Delete
)

// GarbageSelector selects the Leases a sweep looks at: every Lease the
// bridge writes, sessions and heartbeats.
const GarbageSelector = managedSelector

// Classify decides what a sweep may do with l at now. grace is how long a
// Lease must have been left alone before it counts as garbage: longer
// than any lease duration, so a replica that is only slow, or a session
// that is ending, is never swept.
//
// A held session Lease of a deleted VM is only deleted after grace without
// a write: its session ends on its own once KubeVirt closes the VM's
// console, and its replica then releases it.
func Classify(l *coordinationv1.Lease, now time.Time, grace time.Duration) Garbage {
	if l.Labels[labelManagedBy] != managedByBridge {
		return Keep
	}
	last := lastWrite(l)
	if role := l.Labels[labelRole]; role != "" && role != roleHeartbeat {
		// Another role's Lease (a VM's activity record, package
		// activity): not the session package's to judge.
		return Keep
	}
	if l.Labels[labelRole] == roleHeartbeat {
		d := time.Duration(0)
		if l.Spec.LeaseDurationSeconds != nil {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if !last.IsZero() && now.Sub(last) > d+grace {
			return Delete
		}
		return Keep
	}
	if _, _, ok := LeaseVM(l); !ok {
		return Keep
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || (!last.IsZero() && now.Sub(last) > grace) {
		return DeleteIfVMGone
	}
	return Keep
}

// LeaseVM is the VM a session Lease is for, from its annotations.
func LeaseVM(l *coordinationv1.Lease) (namespace, name string, ok bool) {
	namespace, name = l.Annotations[annNamespace], l.Annotations[annName]
	return namespace, name, namespace != "" && name != ""
}

// lastWrite is the latest of the Lease's renew and acquire times.
func lastWrite(l *coordinationv1.Lease) time.Time {
	var t time.Time
	if l.Spec.RenewTime != nil {
		t = l.Spec.RenewTime.Time
	}
	if l.Spec.AcquireTime != nil && l.Spec.AcquireTime.After(t) {
		t = l.Spec.AcquireTime.Time
	}
	return t
}
