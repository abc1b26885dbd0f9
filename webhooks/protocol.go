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

// MaxObjectBytes is the largest object (request.object or
// request.oldObject, as the JSON the API server sends) the webhooks decode:
// 1.5 MiB, etcd's default limit on one stored object (--max-request-bytes),
// so the webhooks refuse no object the cluster could store. A
// VirtualMachine is rarely over a few hundred KiB (KubeVirt caps inline
// cloud-init user data at 2 KiB; larger data goes in a Secret) and a
// ConfigMap's data is capped at 1 MiB by the API server. Without this
// limit, a tenant's server-side dry run, which never reaches etcd, could
// send objects up to the API server's 3 MiB request limit, and every one
// of them costs the webhook a multiple of its size while it is decoded and
// evaluated.
const MaxObjectBytes = 3 << 19

// reviewEnvelopeBytes is what an AdmissionReview carries besides its two
// objects: uid, kinds, names, options and the userInfo (a user in many
// groups, with extra attributes, is a few KiB). 256 KiB is far more.
const reviewEnvelopeBytes = 256 << 10

// maxReviewBytes bounds the body RequireAdmissionReview reads: an UPDATE's
// two objects at MaxObjectBytes each and the envelope. A longer body is
// refused unread; what it costs is at most uidPrefixBytes of it.
const maxReviewBytes = 2*MaxObjectBytes + reviewEnvelopeBytes

// uidPrefixBytes is how much of a refused body (too large, or waiting for
// an admission slot in vain) is read to find its request.uid, so that the
// refusal is an AdmissionReview the API server shows to the user. The API
// server writes the request's uid, kinds and names before the objects, in
// the first few hundred bytes.
const uidPrefixBytes = 64 << 10

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
// used to be answered "allowed". A method other than POST gets 405.
//
// It also bounds what a request may make the webhook decode: a review with
// an object or old object over MaxObjectBytes, or a body over
// maxReviewBytes, is denied before anything but its envelope is decoded (an
// AdmissionReview answer with allowed=false and code 413, naming the limit
// and the fix; a plain HTTP 413 when the body is too large and its uid
// cannot be found in its first uidPrefixBytes). A review that passes
// reaches next unchanged.
func RequireAdmissionReview(next http.Handler) http.Handler {
	log := logf.Log.WithName("webhook-protocol")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, fmt.Sprintf("method %s not allowed: admission webhooks take a POST of an %s %s", r.Method, reviewAPIVersion, reviewKind), http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > maxReviewBytes {
			refuseTooLarge(w, r, io.LimitReader(r.Body, uidPrefixBytes), r.ContentLength)
			return
		}
		body, err := readBody(r.Body, r.ContentLength, maxReviewBytes)
		if err != nil {
			var tooLarge *bodyTooLargeError
			if errors.As(err, &tooLarge) {
				refuseTooLarge(w, r, bytes.NewReader(body[:min(len(body), uidPrefixBytes)]), -1)
				return
			}
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		env, err := checkAdmissionReview(body)
		if err != nil {
			log.V(1).Info("refused a request that is not an AdmissionReview", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if field, size := env.Request.largestObject(); size > MaxObjectBytes {
			log.Info("denied an admission whose object is over the size limit", "path", r.URL.Path, "uid", env.Request.UID, "field", field, "bytes", size)
			writeDenial(w, env.Request.UID, http.StatusRequestEntityTooLarge, objectTooLargeMessage(field, size))
			return
		}
		r.Body = &drainingBody{b: body}
		next.ServeHTTP(w, r)
	})
}

// objectTooLargeMessage is the denial of a review whose object is over
// MaxObjectBytes: the size, the limit and the fix.
func objectTooLargeMessage(field string, size int) string {
	return fmt.Sprintf("virtstation refuses this request: %s is %s, over the %s limit on an object its webhooks decode (the most etcd stores in one object); "+
		"fix: make the object smaller (for a VirtualMachine, move large cloud-init user data into a Secret named by userDataSecretRef; "+
		"for a policy ConfigMap, split its modules across ConfigMaps)",
		field, humanBytes(int64(size)), humanBytes(MaxObjectBytes))
}

// humanBytes is n in MiB or KiB, with the exact byte count.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
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
	// Object and OldObject are only measured, never decoded here.
	Object    jsonSize `json:"object"`
	OldObject jsonSize `json:"oldObject"`
}

// largestObject is the request's larger object, by the length of its JSON,
// and the field it is in.
func (r *requestEnvelope) largestObject() (string, int) {
	if r.OldObject > r.Object {
		return "request.oldObject", int(r.OldObject)
	}
	return "request.object", int(r.Object)
}

// jsonSize is the length of a JSON value, recorded without decoding it.
type jsonSize int

// UnmarshalJSON records the length of b.
func (s *jsonSize) UnmarshalJSON(b []byte) error {
	*s = jsonSize(len(b))
	return nil
}

// CheckAdmissionReview reports why body is not an AdmissionReview the API
// server would send: JSON of apiVersion admission.k8s.io/v1, kind
// AdmissionReview, with a request that has a uid, a kind, a resource and one
// of the four operations. It decodes field names case-sensitively, as the
// handler's decoder does, so what it accepts the handler reads the same way.
func CheckAdmissionReview(body []byte) error {
	_, err := checkAdmissionReview(body)
	return err
}

// checkAdmissionReview is CheckAdmissionReview, returning the envelope it
// read.
func checkAdmissionReview(body []byte) (*reviewEnvelope, error) {
	var env reviewEnvelope
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &env); err != nil {
		return nil, fmt.Errorf("request body is not JSON of an %s %s: %w", reviewAPIVersion, reviewKind, err)
	}
	if env.APIVersion != reviewAPIVersion || env.Kind != reviewKind {
		return nil, fmt.Errorf("request body has apiVersion %q and kind %q, want %q and %q (the webhook configurations declare admissionReviewVersions [v1])",
			env.APIVersion, env.Kind, reviewAPIVersion, reviewKind)
	}
	req := env.Request
	if req == nil {
		return nil, fmt.Errorf("%s has no request", reviewKind)
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
		return nil, fmt.Errorf("%s lacks %s", reviewKind, strings.Join(missing, ", "))
	}
	switch admissionv1.Operation(req.Operation) {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return &env, nil
	}
	return nil, fmt.Errorf("%s has request.operation %q, want CREATE, UPDATE, DELETE or CONNECT", reviewKind, req.Operation)
}
