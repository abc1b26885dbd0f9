package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// Input is one admission of a VirtualMachine.
type Input struct {
	// Operation is CREATE or UPDATE.
	Operation admissionv1.Operation
	// Namespace and Name identify the VM; on CREATE they come from the
	// request when the object leaves them out.
	Namespace, Name string
	// RequestUID identifies the admission request; it seeds the MAC of a VM
	// created with generateName, which has no name yet at admission.
	RequestUID string
	// PolicyRevision, when set, is recorded in virtstation.io/policy-revision.
	PolicyRevision string
	// Object is the request's object as sent, the JSON the patch applies
	// to. Fields the Go types do not know live only here.
	Object json.RawMessage
	// VM is Object decoded by DecodeVM. Mutate works on a copy and never
	// changes it.
	VM *kubevirtv1.VirtualMachine
	// OldVM is the stored object on UPDATE, nil otherwise.
	OldVM *kubevirtv1.VirtualMachine
	// Now is the admission's time, for the checks that bound a time the
	// VM names (a keep-running lease); zero skips them.
	Now time.Time
	// Requester is who sends the request: its userInfo.username, which the
	// API server sets ("" in render).
	Requester string
	// Controller is the lifecycle controller's user, the webhook's own
	// identity: only its requests change the annotations the controller
	// alone writes (guardControllerAnnotations). "" names no one.
	Controller string
}

// Result is the outcome of a mutation.
type Result struct {
	// Patch turns Input.Object into the mutated object; empty when nothing
	// changes or the admission is denied.
	Patch []jsonpatch.Operation
	// Object is Input.Object with Patch applied, decoded: what the API
	// server stores. Mutate fills it; the webhook answers with Patch alone.
	Object map[string]any
	// VM is the mutated typed view (fields the Go types do not know are
	// in Object only); nil when denied.
	VM *kubevirtv1.VirtualMachine
	// Injected is what the webhook did, as also recorded in the annotation.
	Injected api.Injected
	// Warnings explain what was skipped; they go back as admission warnings.
	Warnings []string
	// Denied, when not empty, rejects the admission.
	Denied field.ErrorList
}

// mutation is the state the steps share.
type mutation struct {
	ctx     context.Context
	cluster Cluster
	// in is the admission; in.VM is what the steps read: the VM as sent
	// (on a released VM, without the virtstation.io/ annotations).
	in Input
	// vm is the VM the steps write, a copy of the request's.
	vm *kubevirtv1.VirtualMachine
	// prev is the record a previous admission left on the object.
	prev     api.Injected
	injected api.Injected
	warnings []string
	denied   field.ErrorList
	// sshUser and keysInCloudInit pass from the SSH step to the cloud-init
	// step: the keys go in the cloud-config part, which then lives in the
	// user-data Secret.
	sshUser         string
	keysInCloudInit bool
	// arch is the VM's architecture, resolved once by archOf.
	arch archState
	// released: the VM has lost the virtstation.io/managed label (release.go).
	released bool
}

// step is one concern of the mutation. It edits m.vm and m.injected, adds
// warnings or denials, and returns an error only for internal faults.
type step func(m *mutation) error

// steps run in order. Each reads the request (m.in.VM) and owns distinct
// fields of m.vm.
var steps = []step{
	guardLifecycleAnnotations,
	pinMAC,
	attachDataDisks,
	addGPUs,
	setSSHKeys,
	setVideo,
	checkLifecycle,
	mergeCloudInit, // mounts the disks and carries the keys set above
	checkListLimits,
	checkSecretNames,
}

// Mutate runs the steps on a copy of the input VM and returns the patch
// and the object it makes. It is a pure function of the input and what
// cluster reports, and idempotent: mutating its result again yields the
// same object.
func Mutate(ctx context.Context, in Input, cluster Cluster) (Result, error) {
	res, err := mutateVM(ctx, in, cluster)
	if err != nil || len(res.Denied) > 0 {
		return res, err
	}
	if res.Object, err = applyPatch(in.Object, res.Patch); err != nil {
		return Result{}, err
	}
	return res, nil
}

// mutateVM is Mutate without the patched object: what the webhook needs.
func mutateVM(ctx context.Context, in Input, cluster Cluster) (Result, error) {
	m := &mutation{ctx: ctx, cluster: cluster, in: in, vm: copyForMutation(in.VM)}
	if in.VM.Labels[api.LabelManaged] != api.LabelTrue {
		release(m)
	}
	if checkAnnotationSizes(m); len(m.denied) > 0 {
		return Result{Denied: m.denied}, nil
	}
	prev, err := api.ParseInjected(in.VM.Annotations[api.AnnotationInjected])
	if err != nil {
		// A record that does not parse is ours to rewrite, not a user error.
		m.warnings = append(m.warnings, fmt.Sprintf("annotation %s was not valid JSON and is rewritten", api.AnnotationInjected))
	}
	m.prev = prev
	if m.released && in.VM.Annotations[api.AnnotationInjected] == "" {
		// Released with the record removed too: what to undo is on the
		// stored object.
		m.prev = m.oldInjected()
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("mutate: %w", err)
		}
		if err := s(m); err != nil {
			return Result{}, err
		}
	}
	if len(m.denied) > 0 {
		return Result{Denied: m.denied, Warnings: m.warnings}, nil
	}
	if err := m.writeRecord(); err != nil {
		return Result{}, err
	}
	ops, err := patchFor(in.Object, in.VM, m.vm)
	if err != nil {
		return Result{}, fmt.Errorf("build patch: %w", err)
	}
	return Result{Patch: ops, VM: m.vm, Injected: m.injected, Warnings: m.warnings}, nil
}

// writeRecord writes virtstation.io/injected and the policy revision.
func (m *mutation) writeRecord() error {
	record := ""
	if !m.injected.IsZero() {
		b, err := json.Marshal(m.injected)
		if err != nil {
			return fmt.Errorf("encode injected record: %w", err)
		}
		record = string(b)
	}
	setAnnotation(m.vm, api.AnnotationInjected, record)
	switch {
	case m.released:
		setAnnotation(m.vm, api.AnnotationPolicyRevision, "")
	case m.in.PolicyRevision != "":
		setAnnotation(m.vm, api.AnnotationPolicyRevision, m.in.PolicyRevision)
	}
	return nil
}

// copyForMutation copies vm for the steps to edit: the annotations and the
// template (what the steps write) deeply, the rest (status, dataVolumeTemplates,
// managedFields, …) shared with vm: a VM's bulk is there, and copying it
// would double an admission's memory for nothing.
func copyForMutation(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachine {
	out := *vm
	out.Annotations = maps.Clone(vm.Annotations)
	out.Spec.Template = vm.Spec.Template.DeepCopy()
	return &out
}

// setAnnotation sets or, for an empty value, removes one annotation.
func setAnnotation(vm *kubevirtv1.VirtualMachine, key, value string) {
	if value == "" {
		delete(vm.Annotations, key)
		return
	}
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[key] = value
}

// applyPatch is raw with ops applied, decoded, as the API server applies
// the webhook's answer.
func applyPatch(raw []byte, ops []jsonpatch.Operation) (map[string]any, error) {
	out := raw
	if len(ops) > 0 {
		b, err := json.Marshal(ops)
		if err != nil {
			return nil, fmt.Errorf("encode patch: %w", err)
		}
		p, err := jsonpatchapply.DecodePatch(b)
		if err != nil {
			return nil, fmt.Errorf("decode patch: %w", err)
		}
		if out, err = p.Apply(raw); err != nil {
			return nil, fmt.Errorf("apply patch: %w", err)
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("decode patched object: %w", err)
	}
	return obj, nil
}

// deny adds field errors, naming the rule and the fix in each.
func (m *mutation) deny(errs field.ErrorList, rule, fix string) {
	for _, e := range errs {
		e.Detail = policy.Explain(e.Detail, rule, fix)
		m.denied = append(m.denied, e)
	}
}

// oldInjected is the record on the stored object (UPDATE), or empty.
func (m *mutation) oldInjected() api.Injected {
	if m.in.OldVM == nil {
		return api.Injected{}
	}
	rec, _ := api.ParseInjected(m.in.OldVM.Annotations[api.AnnotationInjected])
	return rec
}
