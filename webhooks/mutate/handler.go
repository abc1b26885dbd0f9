package mutate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/webhooks/admit"
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
// +kubebuilder:webhook:path=/mutate-kubevirt-io-v1-virtualmachine,mutating=true,failurePolicy=fail,sideEffects=None,groups=kubevirt.io,resources=virtualmachines,verbs=create;update,versions=v1,name=vm.mutate.virtstation.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"matchConditions":[{"name":"spec-or-virtstation-metadata-changed","expression":"request.operation != 'UPDATE' || object.spec != oldObject.spec || object.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k])) || oldObject.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?labels.orValue({})) || object.metadata.labels[k] != oldObject.metadata.labels[k])) || object.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?annotations.orValue({})) || oldObject.metadata.annotations[k] != object.metadata.annotations[k])) || oldObject.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?annotations.orValue({})) || object.metadata.annotations[k] != oldObject.metadata.annotations[k]))"}],"objectSelector":{"matchLabels":{"virtstation.io/managed":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]}}`

// Handler is the mutating webhook for VirtualMachines. It decodes the
// request, runs Mutate, and answers with a JSON patch against the raw object.
// It writes nothing and reads no Secret (sideEffects=None): what a VM needs
// in the cluster, its per-VM Secrets, is written by reconcilers from the
// stored VM. It is safe for concurrent use.
type Handler struct {
	cluster  Cluster
	revision func() string
	// controller is the lifecycle controller's user (Input.Controller).
	controller string
}

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithPolicyRevision records the active policy revision on each admitted VM.
func WithPolicyRevision(revision func() string) HandlerOption {
	return func(h *Handler) { h.revision = revision }
}

// WithController names the lifecycle controller's user, the webhook's own
// identity: only its requests may change the annotations the controller
// alone writes (Input.Controller). Without it no request may.
func WithController(user string) HandlerOption {
	return func(h *Handler) { h.controller = user }
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
	out, err := Admit(ctx, h.request(req), h.cluster)
	if derr := (*DecodeError)(nil); errors.As(err, &derr) {
		return admission.Errored(http.StatusBadRequest, derr)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "mutation failed", "uid", req.UID, "namespace", req.Namespace, "name", req.Name)
		return admit.Internal(req.UID, "mutate the VirtualMachine")
	}
	if out.Skipped {
		return admission.Allowed("")
	}
	res := out.Result
	if len(res.Denied) > 0 {
		resp := admit.Deny(res.Denied)
		resp.Warnings = res.Warnings
		return resp
	}
	resp := admit.Patched(res.Patch)
	resp.Warnings = res.Warnings
	return resp
}

// request is req with the webhook's clock, policy revision and identity.
func (h *Handler) request(req admission.Request) Request {
	r := Request{Operation: req.Operation, Namespace: req.Namespace, Name: req.Name, UID: string(req.UID),
		Object: req.Object.Raw, OldObject: req.OldObject.Raw, Now: time.Now(),
		Requester: req.UserInfo.Username, Controller: h.controller}
	if h.revision != nil {
		r.PolicyRevision = h.revision()
	}
	return r
}
