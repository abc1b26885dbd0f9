package provenance

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Checker checks a request against the API server before a webhook acts on
// it with side effects. ok false means the admission fails with resp and
// nothing is written. Verifier is the implementation.
type Checker interface {
	Verify(ctx context.Context, op admissionv1.Operation, key types.NamespacedName, old *Object) (resp admission.Response, ok bool)
}

var _ Checker = Verifier{}

// Verifier reads the stored VM from the API server and decides whether a
// request may have side effects. Safe for concurrent use.
type Verifier struct {
	// Reader reads from the API server, not from a cache (a cache may lag
	// behind the object the API server admits against).
	Reader client.Reader
}

// Verify answers ok when the request for VM key, with oldObject's identity
// old (nil on CREATE), agrees with the API server. Otherwise resp is the
// answer to give: 409 AlreadyExists or Conflict when the request disagrees,
// 500 when the VM could not be read.
func (v Verifier) Verify(ctx context.Context, op admissionv1.Operation, key types.NamespacedName, old *Object) (resp admission.Response, ok bool) {
	if op == admissionv1.Create && key.Name == "" {
		return admission.Response{}, true // generateName: no existing name to collide with
	}
	stored, err := v.stored(ctx, key)
	if err != nil {
		logf.FromContext(ctx).Error(err, "read the stored VM to check the request", "vm", key.String())
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("virtstation could not read VirtualMachine %s to check the request; see the webhook log", key)), false
	}
	verdict := Decide(op, old, stored)
	if verdict == Genuine {
		return admission.Response{}, true
	}
	return Response(verdict, key), false
}

// Response is the refusal for a verdict other than Genuine: the status the
// API server itself would give (AlreadyExists, Conflict), so clients that
// retry on a conflict retry.
func Response(v Verdict, key types.NamespacedName) admission.Response {
	status := &metav1.Status{Status: metav1.StatusFailure, Message: v.Message(key), Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Name: key.Name, Group: kubevirtv1.GroupVersion.Group, Kind: "virtualmachines"}}
	if v == Exists {
		status.Reason = metav1.StatusReasonAlreadyExists
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: status}}
}

func (v Verifier) stored(ctx context.Context, key types.NamespacedName) (*Object, error) {
	var vm metav1.PartialObjectMetadata
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	switch err := v.Reader.Get(ctx, key, &vm); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &Object{UID: vm.UID, ResourceVersion: vm.ResourceVersion}, nil
}
