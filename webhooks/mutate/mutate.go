package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
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
	// Object is the request's object as decoded JSON. Mutate works on a deep
	// copy and never changes it.
	Object map[string]any
	// VM is the typed view of Object, for reading.
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
	// Object is the mutated object.
	Object map[string]any
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
	in      Input
	// obj is the object being built.
	obj map[string]any
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

// step is one concern of the mutation. It edits m.obj and m.injected, adds
// warnings or denials, and returns an error only for internal faults.
type step func(m *mutation) error

// steps run in order. Each reads the typed request (m.in.VM) and owns
// distinct fields of the object.
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

// Mutate applies every step to a copy of the input object. It is a pure
// function of the input and what cluster reports, and idempotent: mutating
// its result again yields the same object.
func Mutate(ctx context.Context, in Input, cluster Cluster) (Result, error) {
	m := &mutation{
		ctx:     ctx,
		cluster: cluster,
		in:      in,
		obj:     copyForMutation(in.Object),
	}
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
	record := ""
	if !m.injected.IsZero() {
		b, err := json.Marshal(m.injected)
		if err != nil {
			return Result{}, fmt.Errorf("encode injected record: %w", err)
		}
		record = string(b)
	}
	if err := setAnnotation(m.obj, api.AnnotationInjected, record); err != nil {
		return Result{}, fmt.Errorf("write injected record: %w", err)
	}
	if m.released {
		if err := setAnnotation(m.obj, api.AnnotationPolicyRevision, ""); err != nil {
			return Result{}, fmt.Errorf("remove policy revision: %w", err)
		}
	} else if in.PolicyRevision != "" {
		if err := setAnnotation(m.obj, api.AnnotationPolicyRevision, in.PolicyRevision); err != nil {
			return Result{}, fmt.Errorf("write policy revision: %w", err)
		}
	}
	return Result{Object: m.obj, Injected: m.injected, Warnings: m.warnings}, nil
}

// mutablePaths are the only subtrees the steps write to. copyForMutation
// deep-copies them and shares the rest of the object (status, the template's
// metadata, dataVolumeTemplates, managedFields, …) with the input: a VM's
// bulk is there, and copying it would double an admission's memory for
// nothing. A step that writes elsewhere must add its path here;
// TestMutateSteps checks that Mutate leaves its input alone.
var mutablePaths = [][]string{pathAnnotations, {"spec", "template", "spec"}}

// copyForMutation copies obj for the steps to edit: the maps on the way to
// each of mutablePaths are copied one level, the subtrees at mutablePaths
// deeply, and everything else is shared with obj.
func copyForMutation(obj map[string]any) map[string]any {
	out := maps.Clone(obj)
	for _, path := range mutablePaths {
		parent := out
		for i, k := range path {
			child, ok := parent[k].(map[string]any)
			if !ok {
				break
			}
			if i == len(path)-1 {
				parent[k] = deepCopyJSON(child)
				break
			}
			// A spine map shared by two paths is cloned twice: the second
			// clone copies the first, never the input.
			child = maps.Clone(child)
			parent[k] = child
			parent = child
		}
	}
	return out
}

// deepCopyJSON copies a decoded JSON value.
func deepCopyJSON(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}
	return out
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopyJSON(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = copyValue(x)
		}
		return out
	default:
		return t
	}
}

// deny adds field errors, naming the rule and the fix in each.
func (m *mutation) deny(errs field.ErrorList, rule, fix string) {
	for _, e := range errs {
		e.Detail = strings.TrimSpace(fmt.Sprintf("%s (rule: %s; fix: %s)", e.Detail, rule, fix))
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
