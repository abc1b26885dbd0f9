package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/admit"
)

// UnmanagedVMPath is where the claim check for VirtualMachines that
// Virtstation does not manage is served.
const UnmanagedVMPath = "/validate-kubevirt-io-v1-virtualmachine-unmanaged"

// The API server calls this webhook only for VMs NOT labelled managed
// (objectSelector), outside the system namespaces, and only when the VM
// has a volume backed by a DataVolume or PVC and is being created or has
// its volumes changed (matchConditions, CEL): every other VM in the cluster
// is never sent to it. failurePolicy=ignore: while Virtstation is down, or
// a condition cannot be evaluated, unmanaged VMs are admitted unchecked.
//
// +kubebuilder:webhook:path=/validate-kubevirt-io-v1-virtualmachine-unmanaged,mutating=false,failurePolicy=ignore,sideEffects=None,groups=kubevirt.io,resources=virtualmachines,verbs=create;update,versions=v1,name=vm-unmanaged.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchExpressions":[{"key":"virtstation.io/managed","operator":"NotIn","values":["true"]}]},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]},"matchConditions":[{"name":"attaches-data-volume-or-pvc","expression":"has(object.spec.template) && has(object.spec.template.spec) && has(object.spec.template.spec.volumes) && object.spec.template.spec.volumes.exists(v, has(v.dataVolume) || has(v.persistentVolumeClaim))"},{"name":"create-or-volumes-changed","expression":"request.operation == 'CREATE' || !has(oldObject.spec.template) || !has(oldObject.spec.template.spec) || !has(oldObject.spec.template.spec.volumes) || object.spec.template.spec.volumes != oldObject.spec.template.spec.volumes"}]}`

// UnmanagedVMHandler is the validating webhook for VirtualMachines that
// are not labelled virtstation.io/managed: it denies attaching a labelled
// data disk that a VM holds a live claim on (writable, or read-only when
// this VM would attach it writable), so that leaving the label off is no
// way around a claim. Disks that are not labelled data disks, and disks
// nobody claims, are admitted. On UPDATE only the disks the update adds
// (or turns writable) are checked: a VM that already had a disk when it
// was claimed is not locked out of its own edits, and KubeVirt's writes,
// which do not touch volumes, never reach this webhook at all.
//
// It only denies; it writes no claims (sideEffects=None). The trade-off:
// a claim written from a webhook that the API server skips whenever it is
// unreachable (failurePolicy=ignore, so that an outage never blocks
// unmanaged VMs) would be there or not depending on luck, and would put
// unmanaged VMs under the Releaser and the deletion guard. So an unmanaged
// VM that attaches a free disk does not claim it, and a managed VM can
// claim that disk later; the managed VM is then still denied while the
// unmanaged VM's VMI is running (the disk is in use).
//
// Failures never deny: a body it cannot read, or disk state it cannot
// read, admits the VM with a warning, as an unreachable webhook would.
// Safe for concurrent use.
type UnmanagedVMHandler struct {
	// Snapshots reads the disks and judges their claims as for managed
	// VMs (JudgeDisk, claims.Live).
	Snapshots Snapshotter
	// Modes are the per-rule enforcement modes; disk-claim's applies.
	Modes *atomic.Pointer[policy.Modes]
	// DryRun is told about each violation when disk-claim is in dryrun mode.
	DryRun func(policy.Violation)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ admission.Handler = (*UnmanagedVMHandler)(nil)

// uncheckedWarning is the admission warning for a VM whose claims could
// not be checked.
const uncheckedWarning = "virtstation could not check this VM's disks against data-disk claims; it was admitted unchecked (see the webhook log for request %s)"

// unmanagedVM is what the handler reads of a VM.
type unmanagedVM struct {
	Metadata struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Labels            map[string]string `json:"labels"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// Handle implements admission.Handler.
func (h *UnmanagedVMHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !admit.CreateOrUpdate(req) {
		return admission.Allowed("")
	}
	log := logf.FromContext(ctx).WithValues("uid", req.UID, "namespace", req.Namespace, "name", req.Name)
	unchecked := func(err error, what string) admission.Response {
		log.Error(err, what)
		return withWarnings(admission.Allowed(""), []string{fmt.Sprintf(uncheckedWarning, req.UID)})
	}
	var vm unmanagedVM
	if err := json.Unmarshal(req.Object.Raw, &vm); err != nil {
		return unchecked(err, "decode unmanaged virtual machine")
	}
	if vm.Metadata.DeletionTimestamp != nil || vm.Metadata.Labels[api.LabelManaged] == api.LabelTrue {
		return admission.Allowed("") // on its way out, or the managed webhook's
	}
	var oldRaw []byte
	if req.Operation == admissionv1.Update {
		oldRaw = req.OldObject.Raw
	}
	attached, err := UnmanagedAttachments(req.Object.Raw, oldRaw)
	if err != nil {
		return unchecked(err, "read volumes of unmanaged virtual machine")
	}
	if len(attached) == 0 {
		return admission.Allowed("")
	}
	name := vm.Metadata.Name
	if name == "" {
		name = req.Name
	}
	self := types.NamespacedName{Namespace: req.Namespace, Name: name}
	names := make([]string, len(attached))
	for i, d := range attached {
		names[i] = d.Name
	}
	snap, err := h.Snapshots.Snapshot(ctx, self.Namespace, self, names, false, h.now())
	if err != nil {
		return unchecked(err, "read disk state")
	}
	deny, warnings := enforce(log, h.Modes, h.DryRun, policy.Decision{Deny: UnmanagedViolations(attached, snap.States)})
	if len(deny) > 0 {
		resp := admit.Deny(ViolationErrors(deny))
		resp.Warnings = warnings
		return resp
	}
	return withWarnings(admission.Allowed(""), warnings)
}

// UnmanagedAttachments returns the disks whose attachment an unmanaged
// VM's admission asks for: on CREATE (oldObject empty) every disk its spec
// attaches (ParseVolumeDisks; the data-disks annotation does nothing for an
// unmanaged VM, so it is not consulted), on UPDATE only those that
// oldObject did not attach, or attached only read-only where object
// attaches them writable.
func UnmanagedAttachments(object, oldObject []byte) ([]VolumeDisk, error) {
	var vm unmanagedVM
	if err := json.Unmarshal(object, &vm); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	attached, err := ParseVolumeDisks(vm.Spec, nil)
	if err != nil || len(oldObject) == 0 {
		return attached, err
	}
	var old unmanagedVM
	if err := json.Unmarshal(oldObject, &old); err != nil {
		return nil, fmt.Errorf("decode oldObject: %w", err)
	}
	had, err := ParseVolumeDisks(old.Spec, nil)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	return addedDisks(attached, had), nil
}

// addedDisks returns the disks of now that had does not attach, or
// attaches only read-only where now attaches them writable.
func addedDisks(now, had []VolumeDisk) []VolumeDisk {
	before := make(map[string]bool, len(had)) // name -> read-only
	for _, d := range had {
		before[d.Name] = d.ReadOnly
	}
	var out []VolumeDisk
	for _, d := range now {
		if readOnly, ok := before[d.Name]; !ok || (readOnly && !d.ReadOnly) {
			out = append(out, d)
		}
	}
	return out
}

// UnmanagedViolations is the disk-claim verdict on an unmanaged VM that
// attaches disks, given their states (JudgeDisk) by name: one violation per
// labelled data disk another VM holds a live writable claim on, or, for a
// writable attachment, live read-only claims on. Other disks are not
// Virtstation's business. Each violation names the field, the rule and the
// fix.
func UnmanagedViolations(disks []VolumeDisk, states map[string]DiskState) []policy.Violation {
	var out []policy.Violation
	for _, d := range disks {
		st := states[d.Name]
		if !st.Exists || !st.Labelled {
			continue
		}
		remove := fmt.Sprintf("remove volume %q from this VM", d.Volume)
		if d.Volume == "" {
			remove = fmt.Sprintf("remove the dataVolumeTemplate %q from this VM", d.Name)
		}
		switch {
		case st.ClaimedBy != "" && st.ClaimLive:
			out = append(out, policy.Violation{ID: policy.RuleDiskClaim, Field: d.Field, Message: policy.Explain(
				fmt.Sprintf("data disk %q is attached writable to VM %s, which Virtstation manages; a VM without the %s=true label cannot share it", d.Name, st.ClaimedBy, api.LabelManaged),
				policy.RuleDiskClaim, fmt.Sprintf("%s, detach the disk from %s or delete that VM first, or use another disk", remove, st.ClaimedBy))})
		case !d.ReadOnly && len(st.SharedBy) > 0:
			readers := strings.Join(st.SharedBy, ", ")
			out = append(out, policy.Violation{ID: policy.RuleDiskClaim, Field: d.Field, Message: policy.Explain(
				fmt.Sprintf("data disk %q is attached read-only to VM %s; a writable attachment needs the disk to itself", d.Name, readers),
				policy.RuleDiskClaim, fmt.Sprintf("attach it read-only here (a cdrom, or readonly: true on its disk), or detach it from %s first", readers))})
		}
	}
	return out
}

func (h *UnmanagedVMHandler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}
