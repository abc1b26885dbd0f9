package webhooks

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// bodyTooLargeError is a request body longer than the limit readBody was
// given.
type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("request body over %d bytes", e.limit)
}

// readBody reads a request body of at most limit bytes. With a known
// contentLength it allocates exactly that once, instead of growing a
// buffer as io.ReadAll does (several times the body in garbage); the
// server stops the body at contentLength. A longer body is a
// *bodyTooLargeError, with the first limit+1 bytes read.
func readBody(r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength >= 0 && contentLength <= limit {
		buf := make([]byte, contentLength)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return b, &bodyTooLargeError{limit: limit}
	}
	return b, nil
}

// drainingBody is a request body read from memory that lets go of its
// bytes once they are read: controller-runtime's handler reads the body
// into its own buffer, and from then on that is the only copy the
// admission holds, not two.
type drainingBody struct{ b []byte }

// Read implements io.Reader.
func (d *drainingBody) Read(p []byte) (int, error) {
	if len(d.b) == 0 {
		d.b = nil
		return 0, io.EOF
	}
	n := copy(p, d.b)
	if d.b = d.b[n:]; len(d.b) == 0 {
		d.b = nil
	}
	return n, nil
}

// Close lets go of what is left unread.
func (d *drainingBody) Close() error {
	d.b = nil
	return nil
}

// refuseTooLarge answers a request whose body is over maxReviewBytes: a
// denial (code 413) for the review's uid when prefix, the start of the
// body, holds one; else a plain HTTP 413. size is the body's length, or -1
// when unknown.
func refuseTooLarge(w http.ResponseWriter, r *http.Request, prefix io.Reader, size int64) {
	what := "over " + humanBytes(maxReviewBytes)
	if size >= 0 {
		what = humanBytes(size) + ", over the " + humanBytes(maxReviewBytes) + " limit"
	}
	msg := fmt.Sprintf("virtstation refuses this request: its AdmissionReview is %s on a review (two objects of at most %s each, and the request's envelope); "+
		"fix: make the object smaller (for a VirtualMachine, move large cloud-init user data into a Secret named by userDataSecretRef)",
		what, humanBytes(MaxObjectBytes))
	uid := sniffUID(prefix)
	logf.Log.WithName("webhook-protocol").Info("refused an admission whose body is over the size limit", "path", r.URL.Path, "uid", uid, "bytes", size)
	if uid == "" {
		http.Error(w, msg, http.StatusRequestEntityTooLarge)
		return
	}
	writeDenial(w, uid, http.StatusRequestEntityTooLarge, msg)
}

// writeDenial answers HTTP 200 with an AdmissionReview that denies request
// uid with code and message: the API server shows the message to the user,
// where it would turn an HTTP error into a generic "failed calling webhook".
func writeDenial(w http.ResponseWriter, uid string, code int32, message string) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: reviewKind},
		Response: &admissionv1.AdmissionResponse{
			UID: types.UID(uid), Allowed: false,
			Result: &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reasonFor(code), Message: message},
		},
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(review); err != nil {
		logf.Log.WithName("webhook-protocol").Error(err, "write denial", "uid", uid)
	}
}

// reasonFor is the Status reason of an HTTP code the webhooks deny with.
func reasonFor(code int32) metav1.StatusReason {
	switch code {
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	}
	return metav1.StatusReasonUnknown
}

// sniffUID returns the request.uid of the AdmissionReview that r starts
// with, reading r token by token (never more than r holds), or "" when r
// ends before the uid or is not such a review.
func sniffUID(r io.Reader) string {
	dec := json.NewDecoder(r)
	if !delim(dec, '{') {
		return ""
	}
	for dec.More() {
		key, ok := stringToken(dec)
		if !ok {
			return ""
		}
		if key != "request" {
			if !skipValue(dec) {
				return ""
			}
			continue
		}
		if !delim(dec, '{') {
			return ""
		}
		for dec.More() {
			k, ok := stringToken(dec)
			if !ok {
				return ""
			}
			if k == "uid" {
				uid, _ := stringToken(dec)
				return uid
			}
			if !skipValue(dec) {
				return ""
			}
		}
		return ""
	}
	return ""
}

// delim reports whether the next token is d.
func delim(dec *json.Decoder, d json.Delim) bool {
	t, err := dec.Token()
	return err == nil && t == d
}

// stringToken is the next token when it is a string.
func stringToken(dec *json.Decoder) (string, bool) {
	t, err := dec.Token()
	if err != nil {
		return "", false
	}
	s, ok := t.(string)
	return s, ok
}

// skipValue reads past the next value, however deep.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}
