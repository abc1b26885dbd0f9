package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/auth"
)

// keepRunningActions are the sessions whose users may keep a VM running:
// anyone who may open its console or its display, the browser's notice
// being on either.
var keepRunningActions = []auth.Action{auth.Console, auth.VNC}

// keepRunningResponse is the body of a successful POST …/keep-running.
type keepRunningResponse struct {
	// KeepRunningUntil is RFC 3339, as the activity Lease's annotation.
	KeepRunningUntil string `json:"keepRunningUntil"`
}

// keepRunning takes a keep-running lease on a VM for the caller, from the
// browser's idle-stop notice: POST with an optional {"duration":"2h"}
// (api.DefaultMaxKeepRunning without one). It is recorded in the VM's
// activity Lease, and counts as activity now. The answer is the lease
// held: capped by the VM's own max-keep-running (the lifecycle controller
// caps it again with the namespace's defaults).
func (s *Server) keepRunning(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	if s.deps.Activity == nil {
		problemf(http.StatusNotImplemented, ReasonBadRequest, "this bridge does not record activity").write(w)
		return
	}
	user, p := s.whoAny(r, ns, name, keepRunningActions)
	if p != nil {
		p.write(w)
		return
	}
	d, p := readKeepRunning(w, r)
	if p != nil {
		p.write(w)
		return
	}
	// No Lease for a VM that does not exist: they stay bounded by the VMs.
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.deps.Reader.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil {
		readProblem(err, "VirtualMachine", ns, name).write(w)
		return
	}
	d = min(d, maxKeepRunning(vm))
	until, err := s.deps.Activity.KeepRunning(r.Context(), ns, name, user.Name, d)
	if err != nil {
		s.deps.Log.Error(err, "keep running", "vm", ns+"/"+name)
		problemf(http.StatusBadGateway, ReasonUpstream, "could not record the keep-running lease in the cluster; try again").write(w)
		return
	}
	s.deps.Log.Info("VM kept running", "vm", ns+"/"+name, "user", user.Name, "until", until)
	body, err := json.Marshal(keepRunningResponse{KeepRunningUntil: until.Format(time.RFC3339)})
	if err != nil {
		problemf(http.StatusInternalServerError, ReasonInternal, "could not encode the answer").write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

// maxKeepRunning is the longest keep-running lease vm's own annotations
// allow (api.DefaultMaxKeepRunning without one; a value that does not
// parse, which the webhook denies, is taken as the default).
func maxKeepRunning(vm *kubevirtv1.VirtualMachine) time.Duration {
	// Another annotation that does not parse leaves this one's value.
	p, _ := api.ParseLifecycle(vm.Annotations, api.LifecycleDefaults{MaxKeepRunning: api.DefaultMaxKeepRunning}, field.NewPath("metadata", "annotations"))
	if p.MaxKeepRunning <= 0 {
		return api.DefaultMaxKeepRunning
	}
	return p.MaxKeepRunning
}

// readKeepRunning reads the request's body, at most
// activity.MaxRequestBytes, and parses it.
func readKeepRunning(w http.ResponseWriter, r *http.Request) (time.Duration, *Problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, activity.MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return 0, problemf(http.StatusRequestEntityTooLarge, ReasonBadRequest, "the body is larger than %d bytes; send {\"duration\":\"2h\"}", activity.MaxRequestBytes)
	case err != nil:
		return 0, problemf(http.StatusBadRequest, ReasonBadRequest, "could not read the body")
	}
	d, err := activity.ParseKeepRunning(body)
	if err != nil {
		return 0, problemf(http.StatusBadRequest, ReasonBadRequest, "%s", err)
	}
	return d, nil
}

// whoAny authenticates the request and allows it when the user may do any
// one of actions to namespace/name, as KubeVirt would authorise that
// action (auth.KubeVirtAccess).
func (s *Server) whoAny(r *http.Request, namespace, name string, actions []auth.Action) (auth.User, *Problem) {
	user, _, p := s.authenticate(r)
	if p != nil {
		return user, p
	}
	var needs []string
	for _, a := range actions {
		err := s.authz.AuthorizeAll(r.Context(), user, auth.KubeVirtAccess(a, namespace, name))
		var fe *auth.ForbiddenError
		switch {
		case err == nil:
			return user, nil
		case errors.As(err, &fe):
			needs = append(needs, fe.Attr.String())
		default:
			s.deps.Log.Error(err, "access review failed", "user", user.Name)
			return user, problemf(http.StatusBadGateway, ReasonUpstream, "the Kubernetes API server could not review access; try again")
		}
	}
	return user, problemf(http.StatusForbidden, ReasonForbidden, "user %q may not do this on %s/%s: it needs %s (the same RBAC as virtctl)",
		user.Name, namespace, name, joinOr(needs))
}

// joinOr lists alternatives: "a", "a or b", "a, b or c".
func joinOr(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, v := range s[:len(s)-1] {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return fmt.Sprintf("%s or %s", out, s[len(s)-1])
}
