package janitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/sshbridge"
)

// Defaults.
const (
	// DefaultEvery is how often each replica sweeps.
	DefaultEvery = 10 * time.Minute
	// DefaultGrace is how long a Lease must be left alone before it counts
	// as garbage; far longer than any lease duration.
	DefaultGrace = time.Hour
)

// Janitor sweeps the bridge's namespace.
type Janitor struct {
	// Kube lists and deletes Leases and ConfigMaps in Namespace.
	Kube      kubernetes.Interface
	Namespace string
	// VMs reads VirtualMachines, to tell whether one still exists.
	VMs client.Reader
	// Every is the sweep period (DefaultEvery when zero); Grace as in
	// session.Classify (DefaultGrace when zero).
	Every, Grace time.Duration
	Log          logr.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Result counts what one sweep deleted.
type Result struct {
	Leases, Heartbeats, Pins int
	// Activity counts the activity Leases of deleted VMs.
	Activity int
}

// Start sweeps every Every, the first time after a random part of it (so
// replicas started together do not sweep together), until ctx ends.
func (j *Janitor) Start(ctx context.Context) {
	every := j.every()
	t := time.NewTimer(rand.N(every) + time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := j.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			j.Log.Error(err, "sweep the bridge's namespace")
		}
		if res != (Result{}) {
			j.Log.Info("swept the bridge's namespace", "sessionLeases", res.Leases, "heartbeats", res.Heartbeats, "hostKeyPins", res.Pins, "activityLeases", res.Activity)
		}
		t.Reset(every)
	}
}

// Sweep runs one pass: it deletes the Leases and pins that are garbage and
// reports how many. An error on one object does not stop the others; the
// errors are joined.
func (j *Janitor) Sweep(ctx context.Context) (Result, error) {
	var res Result
	var errs []error
	gone := vmGone{reader: j.VMs, known: map[types.NamespacedName]bool{}}
	leases, err := j.Kube.CoordinationV1().Leases(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: session.GarbageSelector})
	if err != nil {
		return res, fmt.Errorf("list the bridge's Leases: %w", err)
	}
	now := j.now()
	for i := range leases.Items {
		l := &leases.Items[i]
		if vm, ok := activity.LeaseVM(l); ok {
			// A VM's activity record matters while the VM exists.
			if g, err := gone.check(ctx, vm.Namespace, vm.Name); err != nil || !g {
				errs = append(errs, err)
			} else if deleted, err := j.deleteLease(ctx, l.Name, l.UID, l.ResourceVersion); deleted {
				res.Activity++
			} else {
				errs = append(errs, err)
			}
			continue
		}
		switch session.Classify(l, now, j.grace()) {
		case session.Keep:
			continue
		case session.DeleteIfVMGone:
			ns, name, _ := session.LeaseVM(l)
			if g, err := gone.check(ctx, ns, name); err != nil || !g {
				errs = append(errs, err)
				continue
			}
			if deleted, err := j.deleteLease(ctx, l.Name, l.UID, l.ResourceVersion); deleted {
				res.Leases++
			} else {
				errs = append(errs, err)
			}
		case session.Delete:
			if deleted, err := j.deleteLease(ctx, l.Name, l.UID, l.ResourceVersion); deleted {
				res.Heartbeats++
			} else {
				errs = append(errs, err)
			}
		}
	}
	pins, err := j.Kube.CoreV1().ConfigMaps(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sshbridge.PinSelector})
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("list the host-key pins: %w", err))...)
	}
	for i := range pins.Items {
		cm := &pins.Items[i]
		vm, ok := sshbridge.PinnedVM(cm)
		if !ok {
			continue
		}
		if g, err := gone.check(ctx, vm.Namespace, vm.Name); err != nil || !g {
			errs = append(errs, err)
			continue
		}
		err := j.Kube.CoreV1().ConfigMaps(j.Namespace).Delete(ctx, cm.Name, preconditions(cm.UID, cm.ResourceVersion))
		switch {
		case err == nil:
			res.Pins++
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("delete host-key pin %s: %w", cm.Name, err))
		}
	}
	return res, errors.Join(errs...)
}

// deleteLease deletes the Lease as read; a Lease changed or deleted since
// is neither an error nor deleted.
func (j *Janitor) deleteLease(ctx context.Context, name string, uid types.UID, rv string) (bool, error) {
	err := j.Kube.CoordinationV1().Leases(j.Namespace).Delete(ctx, name, preconditions(uid, rv))
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	default:
		return false, fmt.Errorf("delete Lease %s: %w", name, err)
	}
}

func preconditions(uid types.UID, rv string) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
}

// vmGone tells whether a VM is gone, reading each VM once per sweep.
type vmGone struct {
	reader client.Reader
	known  map[types.NamespacedName]bool
}

func (g vmGone) check(ctx context.Context, namespace, name string) (bool, error) {
	k := types.NamespacedName{Namespace: namespace, Name: name}
	if v, ok := g.known[k]; ok {
		return v, nil
	}
	err := g.reader.Get(ctx, k, &kubevirtv1.VirtualMachine{})
	switch {
	case err == nil:
		g.known[k] = false
		return false, nil
	case apierrors.IsNotFound(err):
		g.known[k] = true
		return true, nil
	default:
		return false, fmt.Errorf("read VM %s: %w", k, err)
	}
}

func (j *Janitor) every() time.Duration {
	if j.Every > 0 {
		return j.Every
	}
	return DefaultEvery
}

func (j *Janitor) grace() time.Duration {
	if j.Grace > 0 {
		return j.Grace
	}
	return DefaultGrace
}

func (j *Janitor) now() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}
