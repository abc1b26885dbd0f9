package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerName names the Releaser in logs and metrics.
const ControllerName = "data-disk-claims"

// Releaser removes stale claims from data disks: claims whose VM does not
// exist, or exists but no longer attaches the disk, once no
// VirtualMachineInstance in the namespace uses the disk and the claim is
// older than Grace (see Decide). That covers VMs deleted, disks detached,
// and claims written for creates that a later admission step rejected.
//
// It reconciles a disk by namespace and name, DataVolume and PVC alike. The
// disk is looked up in Reader (a cache holding the labelled data disks) and,
// when it carries claims, read again through APIReader: the decision is
// taken on, and the release written against, the API server's version, so a
// claim written in the meantime makes the release fail with a conflict
// instead of being lost. Claimant VMs are read through APIReader too (a cache
// may not hold a VM created a moment ago); VMIs through Reader.
//
// Reconcile is safe for concurrent use.
type Releaser struct {
	// Client writes the releases.
	Client client.Client
	// APIReader reads disks and VMs from the API server: mgr.GetAPIReader().
	APIReader client.Reader
	// Reader is the cache: data disks and VMIs are read through it.
	Reader client.Reader
	// Grace is how long a claim counts even though its VM does not exist or
	// does not attach the disk; zero means DefaultGrace. It should be at
	// least RefreshAfter.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NoDataVolumes: CDI is not installed; data disks are PVCs only.
	NoDataVolumes bool
}

// RBAC the Releaser needs:
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines;virtualmachineinstances,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler for a data disk's namespace and
// name.
func (r *Releaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var res ctrl.Result
	for _, newDisk := range r.diskKinds() {
		wait, err := r.reconcileDisk(ctx, req.NamespacedName, newDisk)
		if err != nil {
			return ctrl.Result{}, err
		}
		if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
			res.RequeueAfter = wait
		}
	}
	return res, nil
}

// reconcileDisk releases the stale claims of one disk object and says when
// to look again.
func (r *Releaser) reconcileDisk(ctx context.Context, key types.NamespacedName, newDisk func() client.Object) (time.Duration, error) {
	cached := newDisk()
	if err := r.Reader.Get(ctx, key, cached); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if Read(cached).Empty() {
		return 0, nil
	}
	disk := newDisk()
	if err := r.APIReader.Get(ctx, key, disk); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	s := Read(disk)
	facts := make(map[string]Facts, len(s.Holders()))
	for _, holder := range s.Holders() {
		f, err := r.factsAbout(ctx, holder, s.UID(holder), key)
		if err != nil {
			return 0, err
		}
		facts[holder] = f
	}
	now, grace := r.now(), GraceOrDefault(r.Grace)
	d := Decide(s, facts, false, now, grace)
	if len(d.Release) > 0 {
		inUse, err := r.inUse(ctx, key)
		if err != nil {
			return 0, err
		}
		d = Decide(s, facts, inUse, now, grace)
	}
	if len(d.Release) == 0 {
		return d.RecheckAfter, nil
	}
	if err := release(ctx, r.Client, disk, d.Release...); err != nil {
		if errors.Is(err, ErrConflict) {
			// The disk changed; its update event brings it back.
			return 0, nil
		}
		return 0, err
	}
	ctrl.LoggerFrom(ctx).Info("released data disk claims", "kind", kindOf(disk), "vms", d.Release)
	return d.RecheckAfter, nil
}

// factsAbout reads the claimant holder (bound to uid) of the disk at key
// from the API server.
func (r *Releaser) factsAbout(ctx context.Context, holder string, uid types.UID, key types.NamespacedName) (Facts, error) {
	return ClaimantFacts(ctx, r.APIReader, holder, uid, key)
}

// inUse reports whether a VMI in the disk's namespace has a volume backed
// by it.
func (r *Releaser) inUse(ctx context.Context, key types.NamespacedName) (bool, error) {
	vmis, err := vmisUsing(ctx, r.Reader, key)
	return len(vmis) > 0, err
}

// vmisUsing lists the VMIs in key's namespace with a volume backed by the
// disk key names, as "<ns>/<vmi>".
func vmisUsing(ctx context.Context, reader client.Reader, key types.NamespacedName) ([]string, error) {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := reader.List(ctx, &list, client.InNamespace(key.Namespace)); err != nil {
		return nil, fmt.Errorf("list virtual machine instances in %s: %w", key.Namespace, err)
	}
	var out []string
	for i := range list.Items {
		if UsesDisk(&list.Items[i], key.Name) {
			out = append(out, client.ObjectKeyFromObject(&list.Items[i]).String())
		}
	}
	return out, nil
}

// diskKinds returns constructors of the disk kinds to look at.
func (r *Releaser) diskKinds() []func() client.Object {
	kinds := []func() client.Object{func() client.Object { return &corev1.PersistentVolumeClaim{} }}
	if !r.NoDataVolumes {
		kinds = append(kinds, func() client.Object { return &cdiv1beta1.DataVolume{} })
	}
	return kinds
}

func (r *Releaser) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
