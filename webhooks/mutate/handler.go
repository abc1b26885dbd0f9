package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/webhooks/admit"
	"github.com/virtstation/virtstation/webhooks/provenance"
)

// Path is where the mutating webhook for VirtualMachines is served.
const Path = "/mutate-kubevirt-io-v1-virtualmachine"

// The API server calls the webhook only for VMs labelled
// virtstation.io/managed=true (objectSelector), so failurePolicy=fail cannot
// block unmanaged VMs. Its matchCondition lets through, uncalled, the
// UPDATEs that change neither the spec nor a virtstation.io/ label or
// annotation (KubeVirt's finalizer and annotation writes), so an outage
// blocks only changes to what Virtstation acts on. reinvocationPolicy=IfNeeded
// re-runs it after other mutating webhooks; the mutation is idempotent.
//
// +kubebuilder:webhookconfiguration:mutating=true,name=virtstation-mutating
// +kubebuilder:webhook:path=/mutate-kubevirt-io-v1-virtualmachine,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=kubevirt.io,resources=virtualmachines,verbs=create;update,versions=v1,name=vm.mutate.virtstation.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"matchConditions":[{"name":"spec-or-virtstation-metadata-changed","expression":"request.operation != 'UPDATE' || object.spec != oldObject.spec || object.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k])) || oldObject.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?labels.orValue({})) || object.metadata.labels[k] != oldObject.metadata.labels[k])) || object.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?annotations.orValue({})) || oldObject.metadata.annotations[k] != object.metadata.annotations[k])) || oldObject.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?annotations.orValue({})) || object.metadata.annotations[k] != oldObject.metadata.annotations[k]))"}],"objectSelector":{"matchLabels":{"virtstation.io/managed":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]}}`

// Handler is the mutating webhook for VirtualMachines. It decodes the
// request, runs Mutate, and answers with a JSON patch against the raw object.
// It is safe for concurrent use.
type Handler struct {
	cluster  Cluster
	secrets  SecretWriter
	verifier provenance.Checker
	revision func() string
	dryRun   secretStash
}

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithSecretWriter sets where the Secrets an admission needs are written.
// Without one, an admission that needs a Secret fails unless it is a dry run.
func WithSecretWriter(w SecretWriter) HandlerOption {
	return func(h *Handler) { h.secrets = w }
}

// WithRequestVerifier makes the handler check each request against the API
// server (provenance.Verifier) before it writes Secrets. Without one,
// requests are trusted as sent: only for offline use and unit tests.
func WithRequestVerifier(v provenance.Checker) HandlerOption {
	return func(h *Handler) { h.verifier = v }
}

// WithPolicyRevision records the active policy revision on each admitted VM.
func WithPolicyRevision(revision func() string) HandlerOption {
	return func(h *Handler) { h.revision = revision }
}

// NewHandler returns a Handler that reads cluster state from cluster.
func NewHandler(cluster Cluster, opts ...HandlerOption) *Handler {
	h := &Handler{cluster: cluster}
	for _, o := range opts {
		o(h)
	}
	return h
}

var _ admission.Handler = (*Handler)(nil)

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !admit.CreateOrUpdate(req) {
		return admission.Allowed("")
	}
	if req.Kind.Group != kubevirtv1.GroupVersion.Group || req.Kind.Kind != kubevirtv1.VirtualMachineGroupVersionKind.Kind {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("this webhook mutates kubevirt.io VirtualMachines, not %s", req.Kind.String()))
	}
	in, err := decodeInput(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if in.VM.DeletionTimestamp != nil {
		// Nothing to plumb on a VM being deleted; never block its finalizers.
		return admission.Allowed("")
	}
	if h.revision != nil {
		in.PolicyRevision = h.revision()
	}
	dryRun := admit.DryRun(req)
	cluster := h.cluster
	if dryRun {
		cluster = stashedCluster{Cluster: h.cluster, stash: &h.dryRun, uid: req.UID}
	}
	res, err := Mutate(ctx, in, cluster)
	if resp, ok := dryRunRefusal(err); ok {
		return resp
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "mutation failed", "uid", req.UID, "namespace", in.Namespace, "name", in.Name)
		return admit.Internal(req.UID, "mutate the VirtualMachine")
	}
	if len(res.Denied) > 0 {
		resp := admit.Deny(res.Denied)
		resp.Warnings = res.Warnings
		return resp
	}
	if dryRun {
		h.dryRun.put(req.UID, res.Secrets, time.Now())
	} else if resp, ok := h.verify(ctx, in, res.Secrets); !ok {
		resp.Warnings = res.Warnings
		return resp
	} else if resp, ok := h.writeSecrets(ctx, req, in, res.Secrets); !ok {
		return resp
	}
	// The patch is the diff of the decoded request object and the mutated
	// one (what PatchResponseFromRaw would compute from their bytes).
	ops, err := Patch(in.Object, res.Object)
	if err != nil {
		logf.FromContext(ctx).Error(err, "build patch", "uid", req.UID, "namespace", in.Namespace, "name", in.Name)
		return admit.Internal(req.UID, "build the patch")
	}
	resp := admit.Patched(ops)
	resp.Warnings = res.Warnings
	return resp
}

// verify checks the request against the API server when it is about to
// write Secrets: a CREATE of a name that exists, or an UPDATE whose old
// object is not the stored VM, writes nothing.
func (h *Handler) verify(ctx context.Context, in Input, writes []SecretWrite) (admission.Response, bool) {
	if len(writes) == 0 || h.verifier == nil {
		return admission.Response{}, true
	}
	var old *provenance.Object
	if in.OldVM != nil {
		old = &provenance.Object{UID: in.OldVM.UID, ResourceVersion: in.OldVM.ResourceVersion}
	}
	return h.verifier.Verify(ctx, in.Operation, types.NamespacedName{Namespace: in.Namespace, Name: in.Name}, old)
}

// writeSecrets writes the Secrets the admitted VM needs, concurrently:
// they are distinct objects, each written with its own optimistic
// concurrency (SecretWriter). All writes finish before it returns; the
// answer is decided by the first failed write in order, as if they had been
// written one after another. ok is false when the admission must fail with
// resp.
func (h *Handler) writeSecrets(ctx context.Context, req admission.Request, in Input, writes []SecretWrite) (admission.Response, bool) {
	if len(writes) == 0 {
		return admission.Response{}, true
	}
	if h.secrets == nil {
		return admission.Errored(http.StatusInternalServerError, errors.New("virtstation webhook has no secret writer configured")), false
	}
	// The Secrets' owner is the VM as stored: an UPDATE's object may come
	// without metadata.uid (the API server fills it in after admission).
	owner := in.VM
	if owner.UID == "" && in.OldVM != nil {
		o := *in.VM
		o.UID = in.OldVM.UID
		owner = &o
	}
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { errs[i] = h.secrets.Write(ctx, w, owner) })
	}
	wg.Wait()
	for i, err := range errs {
		w := writes[i]
		if denied, ok := SecretDenial(w, err); ok {
			return admit.Deny(denied), false
		}
		if err != nil {
			logf.FromContext(ctx).Error(err, "write secret", "uid", req.UID, "secret", w.Secret.Name)
			return admit.Internal(req.UID, "write Secret %s", w.Secret.Name), false
		}
	}
	return admission.Response{}, true
}

// decodeInput reads the request's object (and old object on UPDATE).
func decodeInput(req admission.Request) (Input, error) {
	in := Input{Operation: req.Operation, Namespace: req.Namespace, Name: req.Name, RequestUID: string(req.UID)}
	var err error
	if in.Object, in.VM, err = DecodeVM(req.Object.Raw); err != nil {
		return Input{}, err
	}
	if in.Name == "" {
		in.Name = in.VM.Name
	}
	if in.Namespace == "" {
		in.Namespace = in.VM.Namespace
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		in.OldVM = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(req.OldObject.Raw, in.OldVM); err != nil {
			return Input{}, fmt.Errorf("decode old VirtualMachine: %w", err)
		}
	}
	return in, nil
}
