package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons the bridge refuses a session, as they appear in Status bodies,
// close frames and metrics.
const (
	ReasonUnauthorized    = "Unauthorized"
	ReasonForbidden       = "Forbidden"
	ReasonOriginForbidden = "OriginNotAllowed"
	ReasonVMNotFound      = "VMNotFound"
	ReasonVMStopped       = "VMStopped"
	ReasonVMINotRunning   = "VMINotRunning"
	ReasonSessionHeld     = "SessionHeld"
	ReasonHeldOutside     = "HeldOutsideBridge"
	ReasonBadRequest      = "BadRequest"
	ReasonUpstream        = "UpstreamError"
	ReasonInternal        = "InternalError"
)

// Problem is a refusal a person can act on: an HTTP status, a reason a
// program can switch on, and a message that says what to do.
type Problem struct {
	Status  int
	Reason  string
	Message string
	// RetryAfter, when set, is sent as Retry-After (seconds).
	RetryAfter int
	// Holder, for SessionHeld, says who holds the session and since when.
	Holder *HolderInfo
}

// HolderInfo is who holds a session, as a client shows it.
type HolderInfo struct {
	User  string      `json:"user"`
	Since metav1.Time `json:"since"`
	// Reserved means a take-over reserved the session for User, who has
	// not connected yet.
	Reserved bool `json:"reserved,omitempty"`
}

func (p *Problem) Error() string { return p.Reason + ": " + p.Message }

func problemf(status int, reason, format string, args ...any) *Problem {
	return &Problem{Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// statusBody is a Kubernetes Status with the holder in its details, so
// kubectl-style clients print the message.
type statusBody struct {
	metav1.TypeMeta `json:",inline"`
	Status          string      `json:"status"`
	Message         string      `json:"message"`
	Reason          string      `json:"reason"`
	Code            int         `json:"code"`
	Holder          *HolderInfo `json:"holder,omitempty"`
}

// write answers a plain HTTP request (or a handshake from a CLI) with p.
func (p *Problem) write(w http.ResponseWriter) {
	body, err := json.Marshal(statusBody{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: p.Message, Reason: p.Reason, Code: p.Status, Holder: p.Holder,
	})
	if err != nil {
		http.Error(w, p.Message, p.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// closeReason is the close-frame text for a browser: the reason, then as
// much of the message as fits.
func (p *Problem) closeReason() string { return p.Reason + ": " + p.Message }
