package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultGrace is how long a claim counts even though its VM does not exist
// (yet), or does not attach the disk: the VM's create or update may still
// be in flight. The grace exists only to cover the gap between the
// validating admission that writes the claim and the API server storing
// the object: validating webhooks run in parallel, so that gap is at most
// the slowest validating webhook's timeout (Virtstation's are 5 s,
// KubeVirt's 10 s) plus the storage write. 20 s covers it with room to
// spare, and is also all a forged admission (an AdmissionReview POSTed to
// the webhook without passing the API server) can hold a disk for: the
// Releaser then finds no stored VM with the claim's name and uid. The
// webhook's --claim-grace overrides it.
const DefaultGrace = 20 * time.Second

// GraceOrDefault is the grace a setting of d gives: d, or DefaultGrace when
// d is not positive (zero being "not set"). Every component that takes a
// grace resolves it here.
func GraceOrDefault(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return DefaultGrace
}

// RefreshAfter is how old a claim may be before Claim, finding it already in
// place, writes claimed-at again instead of doing nothing. The write changes
// the disk's resourceVersion, so a Releaser that judged the claim stale (its
// VM not existing yet, or no longer attaching the disk) fails to release it
// with a conflict. That closes the race between re-admitting a VM and
// releasing its old claim as long as the Releaser's Grace is at least
// RefreshAfter.
const RefreshAfter = DefaultGrace / 2

// ErrConflict is returned (wrapped, together with the API server's Conflict)
// when the disk changed since it was read: re-read it and decide again.
var ErrConflict = errors.New("disk changed since it was read")

// ErrClaimed is returned (as a *ClaimedError) when writing a claim would
// break exclusivity.
var ErrClaimed = errors.New("disk is claimed by another VM")

// ClaimedError says which claims stand in the way. errors.Is(err,
// ErrClaimed) matches it.
type ClaimedError struct {
	// Holders are the VMs ("<ns>/<vm>") whose claims stand in the way.
	Holders []string
	// Writable is true when Holders is the one writable claim, false when
	// they are read-only claims (which a writable claim cannot join).
	Writable bool
}

// Error implements error.
func (e *ClaimedError) Error() string {
	if e.Writable {
		return fmt.Sprintf("%v: %s holds it writable", ErrClaimed, strings.Join(e.Holders, ", "))
	}
	return fmt.Sprintf("%v: %s share it read-only", ErrClaimed, strings.Join(e.Holders, ", "))
}

// Is makes errors.Is(err, ErrClaimed) true.
func (e *ClaimedError) Is(target error) bool { return target == ErrClaimed }

// Claim writes vm's claim onto the disk obj (a *cdiv1beta1.DataVolume or
// *corev1.PersistentVolumeClaim) as read: writable claims go to claimed-by,
// read-only ones to shared-by; claimed-at becomes now. obj must carry the
// resourceVersion it was read at: the patch is conditional on it, so a
// concurrent writer makes Claim fail with ErrConflict. On success obj is the
// patched object; on failure it is left as read.
//
// Claim does not decide whether the claim is allowed (policy does), but it
// refuses with a *ClaimedError (ErrClaimed) to break exclusivity: a writable
// claim next to another VM's writable or read-only claim, or a read-only one
// next to another VM's writable claim. A VM that holds the other kind of
// claim is switched to the one asked for.
//
// When vm already holds the claim asked for, bound to the uid given (see
// WithUID), and it was written less than RefreshAfter ago, Claim writes
// nothing.
//
// Replacing drops claims the caller judged stale in the same write.
func Claim(ctx context.Context, c client.Client, obj client.Object, vm types.NamespacedName, readOnly bool, now time.Time, opts ...ClaimOption) error {
	var o claimOptions
	for _, opt := range opts {
		opt(&o)
	}
	next, changed, err := claimed(Read(obj), Name(vm), o.uid, readOnly, now, o.replacing)
	if err != nil {
		return fmt.Errorf("claim %s for %s: %w", describe(obj), vm, err)
	}
	if !changed {
		return nil
	}
	if err := write(ctx, c, obj, next); err != nil {
		return fmt.Errorf("claim %s for %s: %w", describe(obj), vm, err)
	}
	return nil
}

// Release removes vm's claims, writable and read-only, from the disk obj,
// conditional on the resourceVersion obj was read at (ErrConflict when it
// changed). It writes nothing when vm holds no claim.
func Release(ctx context.Context, c client.Client, obj client.Object, vm types.NamespacedName) error {
	return release(ctx, c, obj, Name(vm))
}

// release removes the claims of vms ("<ns>/<vm>") in one write.
func release(ctx context.Context, c client.Client, obj client.Object, vms ...string) error {
	cur := Read(obj)
	next := cur.without(vms...)
	if next.equal(cur) {
		return nil
	}
	if err := write(ctx, c, obj, next); err != nil {
		return fmt.Errorf("release %s from %s: %w", describe(obj), strings.Join(vms, ", "), err)
	}
	return nil
}

// ClaimOption adjusts what Claim writes.
type ClaimOption func(*claimOptions)

type claimOptions struct {
	replacing []string
	uid       types.UID
}

// WithUID binds the claim to the VM's metadata.uid (recorded in
// virtstation.io/claim-uids): the claim then holds only while a VM of that
// name with that uid exists (see ClaimantFacts), so a claim written for a
// VM that is never stored, or a VM deleted and created again under the
// same name, is released once its grace runs out. The validating webhook
// always passes it (the API server sets metadata.uid before validating
// admission, on CREATE too); without it the claim is bound by name, as
// claims written before uids were recorded are.
func WithUID(uid types.UID) ClaimOption {
	return func(o *claimOptions) { o.uid = uid }
}

// Replacing makes Claim remove the claims of stale holders ("<ns>/<vm>") in
// the same write as its own: claims the caller's policy judged no longer
// held (VM gone, no VMI, older than the grace period). Without it, a stale
// writable claim makes Claim fail with ErrClaimed until the Releaser has
// removed it. Holders listed that hold no claim, and vm itself, are ignored.
func Replacing(stale ...string) ClaimOption {
	return func(o *claimOptions) { o.replacing = append(o.replacing, stale...) }
}

// claimed returns s with vm's claim (bound to uid unless it is "") added
// and the claims of replacing removed, and whether anything changed.
func claimed(s State, vm string, uid types.UID, readOnly bool, now time.Time, replacing []string) (State, bool, error) {
	base := s
	if stale := slices.DeleteFunc(slices.Clone(replacing), func(h string) bool { return h == vm }); len(stale) > 0 {
		base = s.without(stale...)
	}
	if writer := base.ClaimedBy; writer != "" && writer != vm {
		return s, false, &ClaimedError{Holders: []string{writer}, Writable: true}
	}
	if !readOnly {
		if readers := base.without(vm).SharedBy; len(readers) > 0 {
			return s, false, &ClaimedError{Holders: readers}
		}
	}
	held, heldReadOnly := base.Holds(vm)
	fresh := !base.ClaimedAt.IsZero() && now.Sub(base.ClaimedAt) < RefreshAfter
	// A VM recorded as writer and reader at once (only a hand edit does
	// that) is rewritten with the one claim asked for.
	both := base.ClaimedBy == vm && slices.Contains(base.SharedBy, vm)
	bound := uid == "" || base.UID(vm) == uid
	if held && heldReadOnly == readOnly && fresh && !both && bound && base.equal(s) {
		return s, false, nil
	}
	next := base.without(vm)
	if readOnly {
		next.SharedBy = insertSorted(next.SharedBy, vm)
	} else {
		next.ClaimedBy = vm
	}
	next.ClaimedAt = now
	return next.withUID(vm, uid), true, nil
}

// write patches obj's claim annotations to s with optimistic locking.
func write(ctx context.Context, c client.Client, obj client.Object, s State) error {
	if obj.GetResourceVersion() == "" {
		return errors.New("the object has no resourceVersion; read it from the API server first")
	}
	orig, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("cannot copy %T", obj)
	}
	obj.SetAnnotations(s.apply(obj.GetAnnotations()))
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err == nil {
		return nil
	}
	obj.SetAnnotations(orig.GetAnnotations())
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// describe names obj for errors: "PersistentVolumeClaim ns/name".
func describe(obj client.Object) string {
	return fmt.Sprintf("%s %s/%s", kindOf(obj), obj.GetNamespace(), obj.GetName())
}

// insertSorted adds s to the sorted list, keeping it sorted and unique.
func insertSorted(list []string, s string) []string {
	i, found := slices.BinarySearch(list, s)
	if found {
		return list
	}
	return slices.Insert(list, i, s)
}
