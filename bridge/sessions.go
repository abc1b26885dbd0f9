package bridge

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// sessionStatus is one held session in GET …/sessions.
type sessionStatus struct {
	Mode   string     `json:"mode"`
	Holder HolderInfo `json:"holder"`
}

// sessionList is the body of GET …/sessions.
type sessionList struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Sessions  []sessionStatus `json:"sessions"`
}

// listSessions says who holds which mode of a VM. Anyone who may get the VM
// may see it.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	if _, _, p := s.who(r, auth.ViewAccess(ns, name)); p != nil {
		p.write(w)
		return
	}
	held, err := s.deps.Sessions.List(r.Context(), ns, name)
	if err != nil {
		s.deps.Log.Error(err, "list sessions", "vm", ns+"/"+name)
		problemf(http.StatusBadGateway, ReasonUpstream, "could not read the sessions from the cluster; try again").write(w)
		return
	}
	out := sessionList{Namespace: ns, Name: name, Sessions: []sessionStatus{}}
	for _, h := range held {
		st := sessionStatus{Mode: h.Mode, Holder: HolderInfo{User: h.Holder.User, Reserved: h.Holder.Reserved}}
		st.Holder.Since.Time = h.Holder.Since
		out.Sessions = append(out.Sessions, st)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// takeOver hands a mode's session to the caller: the holder's connection is
// closed with "taken over by another user", and the slot is reserved for the
// caller's next connection. The caller needs the mode's own permission, and
// the VM must run: no Lease is written for a VM or VMI that does not exist,
// so Leases are bounded by the VMs there are.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	m, ok := modes[r.PathValue("mode")]
	if !ok {
		problemf(http.StatusNotFound, ReasonBadRequest, "no session mode %q; use console, vnc or ssh", r.PathValue("mode")).write(w)
		return
	}
	user, _, p := s.who(r, auth.KubeVirtAccess(m.action, ns, name)...)
	if p != nil {
		p.write(w)
		return
	}
	tgt, p := resolve(r.Context(), s.deps.Reader, ns, name, true, m)
	if p != nil {
		p.write(w)
		return
	}
	key := session.Key{Namespace: ns, Name: name, Mode: m.name, VMI: tgt.VMI.UID}
	err := s.deps.Sessions.TakeOver(r.Context(), key, user.Name)
	var held *session.HeldError
	switch {
	case errors.As(err, &held):
		heldProblem(held.Holder).write(w)
		return
	case err != nil:
		s.deps.Log.Error(err, "take over", "key", key.String())
		problemf(http.StatusBadGateway, ReasonUpstream, "could not record the take-over in the cluster; try again").write(w)
		return
	}
	s.deps.Log.Info("session taken over", "mode", m.name, "vm", ns+"/"+name, "user", user.Name)
	w.WriteHeader(http.StatusNoContent)
}

// restart calls KubeVirt's restart subresource for a user allowed to.
func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	user, _, p := s.who(r, auth.KubeVirtAccess(auth.Restart, ns, name)...)
	if p != nil {
		p.write(w)
		return
	}
	if err := s.deps.Upstream.Restart(r.Context(), ns, name); err != nil {
		if errors.Is(err, upstream.ErrNotFound) {
			problemf(http.StatusNotFound, ReasonVMNotFound, "VirtualMachine %s/%s not found", ns, name).write(w)
			return
		}
		s.deps.Log.Error(err, "restart", "vm", ns+"/"+name)
		problemf(http.StatusBadGateway, ReasonUpstream, "KubeVirt did not restart the VM; see the bridge's log").write(w)
		return
	}
	s.deps.Log.Info("VM restarted", "vm", ns+"/"+name, "user", user.Name)
	w.WriteHeader(http.StatusAccepted)
}
