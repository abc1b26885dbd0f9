package webhooks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kjson "sigs.k8s.io/json"
)

// maxReviewBytes bounds the body RequireAdmissionReview reads. It is
// controller-runtime's own limit (two objects of 3 MiB each plus 1 MiB for
// the rest of the review), so the wrapper refuses nothing the handler
// behind it would have taken.
const maxReviewBytes = 7 << 20

// reviewAPIVersion and reviewKind are what the API server sends: the webhook
// configurations declare admissionReviewVersions [v1] only.
var (
	reviewAPIVersion = admissionv1.SchemeGroupVersion.String()
	reviewKind       = "AdmissionReview"
)

// RequireAdmissionReview wraps an admission webhook handler so that a
// request that is not an admission.k8s.io/v1 AdmissionReview with a request
// is refused with HTTP 400 and a message saying what is wrong, instead of
// reaching the handler. controller-runtime decodes any JSON (even {}) into
// an empty review and lets the handler answer it, which is how a POST of {}
// used to be answered "allowed". A method other than POST gets 405, a body
// over maxReviewBytes 413. A review that passes reaches next unchanged.
func RequireAdmissionReview(next http.Handler) http.Handler {
	log := logf.Log.WithName("webhook-protocol")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, fmt.Sprintf("method %s not allowed: admission webhooks take a POST of an %s %s", r.Method, reviewAPIVersion, reviewKind), http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("request body over %d bytes", maxReviewBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := CheckAdmissionReview(body); err != nil {
			log.V(1).Info("refused a request that is not an AdmissionReview", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// reviewEnvelope is the part of an AdmissionReview CheckAdmissionReview
// looks at; the objects are left to the handler.
type reviewEnvelope struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Request    *requestEnvelope `json:"request"`
}

type requestEnvelope struct {
	UID  string `json:"uid"`
	Kind struct {
		Kind string `json:"kind"`
	} `json:"kind"`
	Resource struct {
		Resource string `json:"resource"`
	} `json:"resource"`
	Operation string `json:"operation"`
}

// CheckAdmissionReview reports why body is not an AdmissionReview the API
// server would send: JSON of apiVersion admission.k8s.io/v1, kind
// AdmissionReview, with a request that has a uid, a kind, a resource and one
// of the four operations. It decodes field names case-sensitively, as the
// handler's decoder does, so what it accepts the handler reads the same way.
func CheckAdmissionReview(body []byte) error {
	var env reviewEnvelope
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &env); err != nil {
		return fmt.Errorf("request body is not JSON of an %s %s: %w", reviewAPIVersion, reviewKind, err)
	}
	if env.APIVersion != reviewAPIVersion || env.Kind != reviewKind {
		return fmt.Errorf("request body has apiVersion %q and kind %q, want %q and %q (the webhook configurations declare admissionReviewVersions [v1])",
			env.APIVersion, env.Kind, reviewAPIVersion, reviewKind)
	}
	req := env.Request
	if req == nil {
		return fmt.Errorf("%s has no request", reviewKind)
	}
	var missing []string
	if req.UID == "" {
		missing = append(missing, "request.uid")
	}
	if req.Kind.Kind == "" {
		missing = append(missing, "request.kind.kind")
	}
	if req.Resource.Resource == "" {
		missing = append(missing, "request.resource.resource")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", reviewKind, strings.Join(missing, ", "))
	}
	switch admissionv1.Operation(req.Operation) {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return nil
	}
	return fmt.Errorf("%s has request.operation %q, want CREATE, UPDATE, DELETE or CONNECT", reviewKind, req.Operation)
}
