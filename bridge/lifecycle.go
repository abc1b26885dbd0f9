package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// startMemory is how long a start is remembered for the start-to-connected
// metric: a user who has not connected by then went elsewhere.
const startMemory = 30 * time.Minute

// Start results, the label of virtstation_bridge_starts_total.
const (
	startResultStarted   = "started"
	startResultRunning   = "running"
	startResultForbidden = "forbidden"
	startResultRefused   = "refused"
	startResultError     = "error"
)

// startVM serves POST …/start: the browser's start on connect. The caller
// needs what virtctl start needs (update on virtualmachines/start); the
// bridge then calls KubeVirt's start subresource. A VM already running or
// starting is not an error: 200 with its status. A start made is 202 with
// the status after it.
func (s *Server) startVM(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	user, _, p := s.who(r, auth.KubeVirtAccess(auth.Start, ns, name)...)
	if p != nil {
		if p.Reason == ReasonForbidden {
			s.metrics.starts.WithLabelValues(startResultForbidden).Inc()
		}
		p.write(w)
		return
	}
	code, result := http.StatusAccepted, startResultStarted
	err := s.deps.Upstream.Start(r.Context(), ns, name)
	switch {
	case errors.Is(err, upstream.ErrNotFound):
		problemf(http.StatusNotFound, ReasonVMNotFound, "VirtualMachine %s/%s not found", ns, name).write(w)
		return
	case errors.Is(err, upstream.ErrConflict):
		// Running, starting, or a run strategy that starts it by itself:
		// KubeVirt's 409s. The status says which.
		code, result = http.StatusOK, startResultRunning
	case err != nil:
		s.metrics.starts.WithLabelValues(startResultError).Inc()
		s.deps.Log.Error(err, "start", "vm", ns+"/"+name, "user", user.Name)
		problemf(http.StatusBadGateway, ReasonUpstream, "KubeVirt did not start the VM; see the bridge's log").write(w)
		return
	}
	st, p := s.readStatus(r.Context(), ns, name)
	if p != nil {
		p.write(w)
		return
	}
	if result == startResultRunning && (st.Phase == PhaseStopped || st.Phase == PhaseFailed) {
		s.metrics.starts.WithLabelValues(startResultRefused).Inc()
		s.deps.Log.Info("KubeVirt refused a start", "vm", ns+"/"+name, "user", user.Name, "error", err.Error())
		problemf(http.StatusConflict, ReasonVMStopped, "KubeVirt refused to start VM %s/%s in its state (%s); an administrator can see why in the bridge's log", ns, name, st.Message).write(w)
		return
	}
	s.metrics.starts.WithLabelValues(result).Inc()
	if result == startResultStarted {
		s.starts.started(types.NamespacedName{Namespace: ns, Name: name}, time.Now())
		s.deps.Log.Info("VM started", "vm", ns+"/"+name, "user", user.Name)
	}
	writeStatusJSON(w, code, st)
}

// vmStatusHandler serves GET …/status: the phase of the workstation for the
// progress page and the idle banner. Anyone who may open its console or
// its display may see it.
func (s *Server) vmStatusHandler(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	user, p := s.whoAny(r, ns, name, []auth.Action{auth.Console, auth.VNC})
	if p != nil {
		p.write(w)
		return
	}
	st, p := s.readStatus(r.Context(), ns, name)
	if p != nil {
		p.write(w)
		return
	}
	if st.Phase == PhaseStopped {
		err := s.authz.AuthorizeAll(r.Context(), user, auth.KubeVirtAccess(auth.Start, ns, name))
		can := err == nil
		st.CanStart = &can
	}
	writeStatusJSON(w, http.StatusOK, st)
}

// readStatus reads the VM and its VMI and derives the phase.
func (s *Server) readStatus(ctx context.Context, ns, name string) (vmStatus, *Problem) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.deps.Reader.Get(ctx, key, vm); err != nil {
		return vmStatus{}, readProblem(err, "VirtualMachine", ns, name)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.deps.Reader.Get(ctx, key, vmi); apierrors.IsNotFound(err) {
		vmi = nil
	} else if err != nil {
		return vmStatus{}, readProblem(err, "VirtualMachineInstance", ns, name)
	}
	return phaseOf(vm, vmi), nil
}

// writeStatusJSON answers v with code, never cached: a status is of the moment.
func writeStatusJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		problemf(http.StatusInternalServerError, ReasonInternal, "could not encode the answer").write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// startTimes remembers when this replica started each VM, until the first
// session to it connects, for virtstation_bridge_start_to_connected_seconds.
// Entries older than startMemory are dropped, so it holds at most the VMs
// started in that window. Safe for concurrent use.
type startTimes struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

func (t *startTimes) started(vm types.NamespacedName, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[types.NamespacedName]time.Time{}
	}
	for k, at := range t.at {
		if now.Sub(at) > startMemory {
			delete(t.at, k)
		}
	}
	t.at[vm] = now
}

// connected forgets vm's start and says how long ago it was; false when
// none is remembered.
func (t *startTimes) connected(vm types.NamespacedName, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[vm]
	if !ok {
		return 0, false
	}
	delete(t.at, vm)
	if d := now.Sub(at); d <= startMemory {
		return d, true
	}
	return 0, false
}

// sessionConnected observes the start-to-connected time of the VM a session
// just connected to, if this replica started it.
func (s *Server) sessionConnected(ns, name string) {
	if d, ok := s.starts.connected(types.NamespacedName{Namespace: ns, Name: name}, time.Now()); ok {
		s.metrics.startToConnected.Observe(d.Seconds())
	}
}
