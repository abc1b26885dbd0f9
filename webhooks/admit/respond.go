package admit

import (
	"fmt"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Deny builds a 403 response whose message lists every field error (path,
// rule and fix) and whose status details carry them as causes, as the API
// server's own validation does.
func Deny(errs field.ErrorList) admission.Response {
	resp := admission.Denied(errs.ToAggregate().Error())
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: e.ErrorBody(), Field: e.Field})
	}
	resp.Result.Details = &metav1.StatusDetails{Causes: causes}
	return resp
}

// Internal builds the 500 response for a fault of the webhook itself:
// "virtstation could not <what>; see the webhook log for request <uid>".
// what is formatted with args; the fault's details belong in the log line
// the caller writes, never in the answer.
func Internal(uid types.UID, what string, args ...any) admission.Response {
	return admission.Errored(http.StatusInternalServerError, fmt.Errorf(
		"virtstation could not %s; see the webhook log for request %s", fmt.Sprintf(what, args...), uid))
}

// Patched allows the request with the JSON patch ops (none: allowed as is).
func Patched(ops []jsonpatch.Operation) admission.Response {
	resp := admission.Patched("", ops...)
	if len(ops) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	return resp
}
