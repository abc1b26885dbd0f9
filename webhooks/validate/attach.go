package validate

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/admit"
)

// AttachViolations is the disk-claim verdict on attaching disks outside a
// managed VM's own admission (a VMI created directly, a hot-plug), given
// the disks' states (JudgeDisk, judged for the attaching VM) by name: one
// violation per labelled data disk another VM holds a live writable claim
// on, or, for a writable attachment, live read-only claims on. Disks that
// are not labelled data disks, and free disks, are not Virtstation's
// business. fix says how to undo the attachment; each message names the
// field, the rule and the fix, and names a holder only when it is in
// namespace (the request's): a webhook names no object outside it.
func AttachViolations(namespace string, disks []VolumeDisk, states map[string]DiskState, fix string) []policy.Violation {
	var out []policy.Violation
	for _, d := range disks {
		st := states[d.Name]
		if !st.Exists || !st.Labelled {
			continue
		}
		switch {
		case st.ClaimedBy != "" && st.ClaimLive:
			out = append(out, policy.Violation{ID: policy.RuleDiskClaim, Field: d.Field, Message: policy.Explain(
				fmt.Sprintf("data disk %q is claimed writable by %s, and a claimed disk is attached only by the VM that claims it", d.Name, holderName(st.ClaimedBy, namespace)),
				policy.RuleDiskClaim, fix+", or detach the disk from that VM or delete it first, or use another disk")})
		case !d.ReadOnly && len(st.SharedBy) > 0:
			names := make([]string, len(st.SharedBy))
			for i, h := range st.SharedBy {
				names[i] = holderName(h, namespace)
			}
			out = append(out, policy.Violation{ID: policy.RuleDiskClaim, Field: d.Field, Message: policy.Explain(
				fmt.Sprintf("data disk %q is attached read-only to %s; a writable attachment needs the disk to itself", d.Name, strings.Join(names, ", ")),
				policy.RuleDiskClaim, "attach it read-only (a cdrom, or readonly: true on its disk), or "+fix)})
		}
	}
	return out
}

// ForeignSelfClaims is the disk-claim verdict on disks whose claim carries
// the attaching VM's name but another uid than uid: a VM of that name that
// is gone (or was never stored) holds it, not this one. Such a claim is
// not this VM's to use while it holds (live: young, or in use); the
// Releaser removes it otherwise, and the VM's own admission then claims
// the disk. uid "" (not known) finds none.
func ForeignSelfClaims(self string, uid types.UID, disks []VolumeDisk, raw map[string]claims.State, fix string) []policy.Violation {
	if uid == "" {
		return nil
	}
	var out []policy.Violation
	for _, d := range disks {
		s, ok := raw[d.Name]
		if !ok {
			continue
		}
		if held, _ := s.Holds(self); !held || s.UID(self) == "" || s.UID(self) == uid {
			continue
		}
		out = append(out, policy.Violation{ID: policy.RuleDiskClaim, Field: d.Field, Message: policy.Explain(
			fmt.Sprintf("data disk %q is claimed by an earlier VM of this name (another uid), not by this one", d.Name),
			policy.RuleDiskClaim, fix+", or wait until that claim is released (seconds after that VM is gone) and attach it through this VM's spec")})
	}
	return out
}

// holderName names a claim holder in a message: "VM <ns>/<vm>" when it is
// in namespace, else "a VM of another namespace".
func holderName(holder, namespace string) string {
	if vm, ok := claims.ParseName(holder); ok && vm.Namespace == namespace {
		return "VM " + holder
	}
	return "a VM of another namespace"
}

// attachChecker is the part the VMI and VM status webhooks share: read the
// disks' claim state for the attaching VM, judge it, and answer.
type attachChecker struct {
	// Snapshots reads the disks and judges their claims (JudgeDisk).
	Snapshots Snapshotter
	// Modes are the per-rule enforcement modes; disk-claim's applies.
	Modes *atomic.Pointer[policy.Modes]
	// DryRun is told about each violation when disk-claim is in dryrun mode.
	DryRun func(policy.Violation)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// attachRequest is one attachment to judge.
type attachRequest struct {
	// self is the VM the disks are attached for ("<ns>/" when none: a VMI
	// created directly), and uid its metadata.uid ("" when not known).
	self types.NamespacedName
	uid  types.UID
	// disks are the attachments the request adds.
	disks []VolumeDisk
	// fix says how to undo the attachment, for messages.
	fix string
	// failClosed: an internal error denies (500) rather than admitting
	// with a warning.
	failClosed bool
}

// check judges a and answers.
func (c attachChecker) check(ctx context.Context, req admission.Request, a attachRequest) admission.Response {
	if len(a.disks) == 0 {
		return admission.Allowed("")
	}
	log := logf.FromContext(ctx).WithValues("uid", req.UID, "namespace", req.Namespace, "name", req.Name)
	names := make([]string, len(a.disks))
	for i, d := range a.disks {
		names[i] = d.Name
	}
	snap, err := c.Snapshots.Snapshot(ctx, req.Namespace, a.self, names, false, c.now())
	if err != nil {
		log.Error(err, "read disk state")
		if a.failClosed {
			return admit.Internal(req.UID, "read the data disks' state")
		}
		return withWarnings(admission.Allowed(""), []string{fmt.Sprintf(uncheckedWarning, req.UID)})
	}
	raw := make(map[string]claims.State, len(snap.Objects))
	for name, obj := range snap.Objects {
		raw[name] = claims.Read(obj)
	}
	violations := AttachViolations(req.Namespace, a.disks, snap.States, a.fix)
	violations = append(violations, ForeignSelfClaims(a.self.String(), a.uid, a.disks, raw, a.fix)...)
	deny, warnings := enforce(log, c.Modes, c.DryRun, policy.Decision{Deny: violations})
	if len(deny) > 0 {
		resp := admit.Deny(ViolationErrors(deny))
		resp.Warnings = warnings
		return resp
	}
	return withWarnings(admission.Allowed(""), warnings)
}

func (c attachChecker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// badRequest answers a body the webhook cannot read: 400 when it fails
// closed, else admitted with a warning, as an unreachable webhook would.
func badRequest(ctx context.Context, req admission.Request, err error, failClosed bool) admission.Response {
	if failClosed {
		return admission.Errored(http.StatusBadRequest, err)
	}
	logf.FromContext(ctx).Error(err, "decode request", "uid", req.UID)
	return withWarnings(admission.Allowed(""), []string{fmt.Sprintf(uncheckedWarning, req.UID)})
}
