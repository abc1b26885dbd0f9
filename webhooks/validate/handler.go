package validate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/admit"
	"github.com/virtstation/virtstation/webhooks/provenance"
)

// VMPath is where the validating webhook for VirtualMachines is served.
const VMPath = "/validate-kubevirt-io-v1-virtualmachine"

// maxClaimAttempts bounds the re-read and re-evaluate loop when another
// admission wins a race for a disk between our read and our claim write.
const maxClaimAttempts = 5

// The objectSelector keeps unmanaged VMs out, so failurePolicy=fail cannot
// block them, and the matchCondition (the same as the mutating webhook's)
// skips the UPDATEs that change neither the spec nor a virtstation.io/
// label or annotation. sideEffects=NoneOnDryRun: claims are written only on
// real admissions.
//
// +kubebuilder:webhook:path=/validate-kubevirt-io-v1-virtualmachine,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=kubevirt.io,resources=virtualmachines,verbs=create;update,versions=v1,name=vm.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"matchConditions":[{"name":"spec-or-virtstation-metadata-changed","expression":"request.operation != 'UPDATE' || object.spec != oldObject.spec || object.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k])) || oldObject.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?labels.orValue({})) || object.metadata.labels[k] != oldObject.metadata.labels[k])) || object.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?annotations.orValue({})) || oldObject.metadata.annotations[k] != object.metadata.annotations[k])) || oldObject.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?annotations.orValue({})) || object.metadata.annotations[k] != oldObject.metadata.annotations[k]))"}],"objectSelector":{"matchLabels":{"virtstation.io/managed":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]}}`

// VMHandler is the validating webhook for managed VirtualMachines: it
// evaluates the active Rego policy set on the request and the disk/claim
// snapshot, applies the per-rule enforcement modes, and, when the VM is
// admitted for real, records its claims on the disks it attaches: those of
// its virtstation.io/data-disks annotation, and the labelled data disks its
// volumes or dataVolumeTemplates name directly. Safe for
// concurrent use.
type VMHandler struct {
	Engine    *Engine
	Modes     *atomic.Pointer[policy.Modes]
	Snapshots Snapshotter
	// Client writes claims.
	Client client.Client
	// Verifier checks a request against the API server before its claims
	// are written (nil trusts requests as sent: unit tests only).
	Verifier provenance.Checker
	// DryRun is told about each violation of a rule in dryrun mode.
	DryRun func(policy.Violation)
	// Recorder reports evaluations that ran past their deadline, on the
	// policy ConfigMap of the module responsible (or the VM); nil reports
	// none.
	Recorder events.EventRecorder
	// Metrics counts those evaluations; nil means DefaultMetrics().
	Metrics *Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ admission.Handler = (*VMHandler)(nil)

// judge evaluates the policies on r with the disks' states, and enforces
// the modes: done with resp when the answer is not to allow (a denial, bad
// input, a deadline, a fault); otherwise the warnings to give.
func (h *VMHandler) judge(ctx context.Context, req admission.Request, r Request, self types.NamespacedName, states map[string]DiskState) (warnings []string, resp admission.Response, done bool) {
	log := logf.FromContext(ctx).WithValues("uid", req.UID, "vm", self.String())
	decision, err := h.Engine.EvaluateRequest(ctx, r, states)
	var bad *badInputError
	if errors.As(err, &bad) {
		return nil, admission.Errored(http.StatusBadRequest, err), true
	}
	var late *DeadlineError
	if errors.As(err, &late) {
		return nil, h.deadlineDenied(ctx, req, self, late), true
	}
	if err != nil {
		log.Error(err, "evaluate policies")
		return nil, admit.Internal(req.UID, "evaluate its policies"), true
	}
	deny, warnings := enforce(log, h.Modes, h.DryRun, decision)
	if len(deny) > 0 {
		resp := admit.Deny(ViolationErrors(deny))
		resp.Warnings = warnings
		return nil, resp, true
	}
	return warnings, admission.Response{}, false
}

// Handle implements admission.Handler.
func (h *VMHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !admit.CreateOrUpdate(req) {
		return admission.Allowed("")
	}
	if !h.Engine.Ready() {
		return admission.Errored(http.StatusServiceUnavailable, errors.New("virtstation policies are not loaded yet; try again shortly"))
	}
	// The object is decoded once, generically: the handler reads only the
	// annotation and the deletion timestamp, and the policies see JSON.
	// (The mutating webhook, which runs first, decodes the typed view.)
	r, err := DecodeRequest(string(req.Operation), req.Namespace, req.Name, req.Object.Raw, req.OldObject.Raw, req.UserInfo)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if r.Deleting() {
		// A VM on its way out must be able to drop its finalizers even when
		// a policy changed since it was admitted.
		return admission.Allowed("")
	}
	self := types.NamespacedName{Namespace: req.Namespace, Name: r.Name}
	targets := ClaimTargets(r.DataDisks(), r.VolumeDisks())
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	log := logf.FromContext(ctx).WithValues("uid", req.UID, "vm", self.String())
	dryRun := admit.DryRun(req)
	var (
		uid  types.UID // the VM's metadata.uid, which its claims are bound to
		resp admission.Response
		ok   bool
	)

	for attempt := 0; attempt < maxClaimAttempts; attempt++ {
		now := h.now()
		snap, err := h.Snapshots.Snapshot(ctx, self.Namespace, self, names, attempt > 0, now)
		if err != nil {
			log.Error(err, "read disk state")
			return admit.Internal(req.UID, "read the data disks' state")
		}
		warnings, judged, done := h.judge(ctx, req, r, self, snap.States)
		if done {
			return judged
		}
		if dryRun {
			return withWarnings(admission.Allowed(""), warnings)
		}
		if attempt == 0 {
			if uid, resp, ok = h.verify(ctx, req, self, len(snap.Objects) > 0); !ok {
				return withWarnings(resp, warnings)
			}
		}
		err = h.claim(ctx, self, uid, targets, snap, now)
		if errors.Is(err, claims.ErrConflict) || errors.Is(err, claims.ErrClaimed) {
			log.V(1).Info("claim race lost; re-reading", "attempt", attempt, "reason", err.Error())
			continue
		}
		if err != nil {
			log.Error(err, "write claims")
			return admit.Internal(req.UID, "record the disk claims")
		}
		return withWarnings(admission.Allowed(""), warnings)
	}
	return admit.Deny(field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(api.AnnotationDataDisks),
		policy.Explain("the data disks' claims kept changing while this VM was admitted", policy.RuleDiskClaim, "try again"))})
}

// ClaimTarget is a disk an admitted managed VM claims.
type ClaimTarget struct {
	// Name is the DataVolume or PVC.
	Name string
	// ReadOnly: the claim is a read-only one.
	ReadOnly bool
	// Direct: named by a volume or dataVolumeTemplate, not the annotation;
	// claimed only when it is a labelled data disk.
	Direct bool
}

// ClaimTargets lists the disks a managed VM claims: those of its
// data-disks annotation (as api.ParseDataDisks gives them: a cdrom is
// ReadOnly), in order, then those its volumes attach directly
// (which never repeat an annotated name). `virtstation render` claims the
// same.
func ClaimTargets(disks []api.DataDisk, direct []VolumeDisk) []ClaimTarget {
	out := make([]ClaimTarget, 0, len(disks)+len(direct))
	for _, d := range disks {
		out = append(out, ClaimTarget{Name: d.Name, ReadOnly: d.ReadOnly})
	}
	for _, d := range direct {
		out = append(out, ClaimTarget{Name: d.Name, ReadOnly: d.ReadOnly, Direct: true})
	}
	return out
}

// claim records self's claim on each target disk that exists (and, for a
// disk its volumes name directly, is labelled a data disk), replacing
// claims the snapshot found dead in the same conditional write. The disks
// are distinct objects (targets never repeat a name), so their writes run
// concurrently; each is conditional on the resourceVersion it was read at.
// All writes finish before claim returns, and the error is that of the
// first failed disk in target order, as if they had been written one after
// another: a lost race (ErrConflict, ErrClaimed) makes the caller re-read
// and re-evaluate, anything else is an internal error.
func (h *VMHandler) claim(ctx context.Context, self types.NamespacedName, uid types.UID, targets []ClaimTarget, snap Snapshot, now time.Time) error {
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		obj, ok := snap.Objects[t.Name]
		if !ok || (t.Direct && !snap.States[t.Name].Labelled) {
			continue
		}
		wg.Go(func() {
			errs[i] = claims.Claim(ctx, h.Client, obj, self, t.ReadOnly, now, claims.WithUID(uid), claims.Replacing(snap.Dead[t.Name]...))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// verify checks the request against the API server before claims are
// written (package provenance): a forged, stale or replayed request writes
// no claim. It returns the VM's metadata.uid, which the claims are bound
// to: the API server sets it before validating admission, on CREATE too,
// so an object without one did not come through the API server and writes
// nothing. Requests that claim nothing are not checked.
func (h *VMHandler) verify(ctx context.Context, req admission.Request, self types.NamespacedName, claims bool) (types.UID, admission.Response, bool) {
	if !claims {
		return "", admission.Response{}, true
	}
	obj, err := provenance.Identity(req.Object.Raw)
	if err != nil {
		return "", admission.Errored(http.StatusBadRequest, err), false
	}
	if obj == nil || obj.UID == "" {
		return "", admission.Errored(http.StatusBadRequest, errNoUID), false
	}
	if h.Verifier == nil {
		return obj.UID, admission.Response{}, true
	}
	old, err := provenance.Identity(req.OldObject.Raw)
	if err != nil {
		return "", admission.Errored(http.StatusBadRequest, err), false
	}
	resp, ok := h.Verifier.Verify(ctx, req.Operation, self, old)
	return obj.UID, resp, ok
}

// errNoUID answers a request that would write claims for an object without
// metadata.uid.
var errNoUID = errors.New("the VirtualMachine has no metadata.uid; the API server sets it before validating admission, so this request did not come through the API server (virtstation wrote nothing)")

func (h *VMHandler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func withWarnings(resp admission.Response, warnings []string) admission.Response {
	resp.Warnings = warnings
	return resp
}
