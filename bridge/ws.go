package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/upstream"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// handshakeTimeout bounds the client's WebSocket handshake.
const handshakeTimeout = 10 * time.Second

// releaseTimeout bounds giving a session's Lease back at its end.
const releaseTimeout = 5 * time.Second

// busyRetryInterval spaces dials while KubeVirt still sees the taken-over
// connection.
const busyRetryInterval = 250 * time.Millisecond

// clientSubprotocols are answered, in this order of preference, when the
// client offers them; the bearer-token subprotocol is never echoed.
var clientSubprotocols = []string{upstream.Subprotocol, "binary.kubevirt.io", "binary"}

// session serves one mode's WebSocket. byVM is false on KubeVirt's own VMI
// paths, where only the VMI is looked up.
func (s *Server) session(m mode, byVM bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		log := s.deps.Log.WithValues("mode", m.name, "vm", ns+"/"+name)
		if !websocket.IsWebSocketUpgrade(r) {
			s.refuse(w, r, m, auth.Credential{}, problemf(http.StatusBadRequest, ReasonBadRequest, "this endpoint speaks WebSocket only"))
			return
		}
		user, cred, p := s.who(r, m.access(ns, name))
		if p != nil {
			s.refuse(w, r, m, cred, p)
			return
		}
		log = log.WithValues("user", user.Name)
		tgt, p := resolve(r.Context(), s.deps.Reader, ns, name, byVM)
		if p != nil {
			s.refuse(w, r, m, cred, p)
			return
		}
		takeover := r.URL.Query().Get("takeover") == "true"
		sess, p := s.acquire(r.Context(), session.Key{Namespace: ns, Name: name, Mode: m.name}, user.Name, takeover)
		if p != nil {
			s.refuse(w, r, m, cred, p)
			return
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), releaseTimeout)
			defer cancel()
			if err := sess.Release(ctx); err != nil {
				log.Error(err, "release session")
			}
		}()

		var up relay.Endpoint
		if m.sub != "" {
			conn, p := s.dialUpstream(r.Context(), ns, name, m.sub, takeover)
			if p != nil {
				s.refuse(w, r, m, cred, p)
				return
			}
			up = relay.NewWS(conn, relay.WSOptions{ReadLimit: upstreamReadLimit, PingInterval: s.opts.PingInterval, WriteTimeout: s.opts.WriteTimeout, Coalesce: true})
		}
		conn, err := s.upgrader.Upgrade(w, r, nil)
		if err != nil {
			if up != nil {
				_ = up.Close(websocket.CloseNormalClosure, "client handshake failed")
			}
			return // the upgrader answered the client
		}
		s.metrics.requests.WithLabelValues(m.name, "OK").Inc()
		client := relay.NewWS(conn, relay.WSOptions{ReadLimit: m.readLimit, PingInterval: s.opts.PingInterval, WriteTimeout: s.opts.WriteTimeout})

		filter := relay.ClientFilter(relay.ConsoleFilter)
		var interceptor relay.Interceptor
		meter := relay.Meter(s.metrics.meter(m.name))
		switch m.name {
		case modeVNC.name:
			filter = nil
			vm := s.metrics.vncSession(ns, name)
			defer vm.end()
			meter = vm.meter(meter)
			interceptor = vnc.NewProxy(vnc.Options{
				Adaptive:    adaptive(r, s.opts.VNCAdaptive),
				Observer:    vm,
				Log:         log,
				LogInterval: s.opts.VNCLogInterval,
			})
		case modeSSH.name:
			var end *relay.Ending
			up, filter, end = s.openSSH(r.Context(), client, tgt, log)
			if end != nil {
				s.metrics.ended(m.name, end.Code)
				return
			}
		}

		log.Info("session started", "since", sess.Since)
		s.metrics.active.WithLabelValues(m.name).Inc()
		end := relay.Relay(s.ctx, client, up, relay.Options{
			IdleTimeout:  s.opts.IdleTimeout,
			Filter:       filter,
			Interceptor:  interceptor,
			Lost:         sess.Lost(),
			LostEnding:   func() relay.Ending { return lostEnding(sess.LostReason()) },
			Meter:        meter,
			UpstreamName: m.upstreamName,
		})
		s.metrics.active.WithLabelValues(m.name).Dec()
		s.metrics.ended(m.name, end.Code)
		log.Info("session ended", "code", end.Code, "reason", end.Reason)
	}
}

// adaptive is the session's choice of the adaptive VNC controller: the
// query parameter, else the deployment's default.
func adaptive(r *http.Request, def bool) bool {
	switch r.URL.Query().Get("adaptive") {
	case "true", "1", "on":
		return true
	case "false", "0", "off":
		return false
	}
	return def
}

// acquire takes the session slot, or explains who holds it.
func (s *Server) acquire(ctx context.Context, key session.Key, user string, takeover bool) (*session.Session, *Problem) {
	var sess *session.Session
	var err error
	if takeover {
		sess, err = s.deps.Sessions.AcquireTakingOver(ctx, key, user)
	} else {
		sess, err = s.deps.Sessions.Acquire(ctx, key, user)
	}
	var held *session.HeldError
	switch {
	case errors.As(err, &held):
		return nil, heldProblem(held.Holder)
	case err != nil:
		s.deps.Log.Error(err, "acquire session", "key", key.String())
		return nil, problemf(http.StatusBadGateway, ReasonUpstream, "could not record the session in the cluster; try again")
	}
	return sess, nil
}

func heldProblem(h session.Holder) *Problem {
	since := h.Since.UTC().Format("15:04:05Z")
	msg := fmt.Sprintf("held by %s since %s; take over to continue", h.User, since)
	if h.Reserved {
		msg = fmt.Sprintf("reserved for %s by a take-over at %s", h.User, since)
	}
	p := problemf(http.StatusConflict, ReasonSessionHeld, "%s", msg)
	p.Holder = &HolderInfo{User: h.User, Reserved: h.Reserved}
	p.Holder.Since.Time = h.Since
	return p
}

// dialUpstream opens KubeVirt's subresource. After a take-over KubeVirt may
// still see the old connection for a moment, so "busy" is retried briefly.
func (s *Server) dialUpstream(ctx context.Context, ns, name string, sub upstream.Subresource, takeover bool) (*websocket.Conn, *Problem) {
	deadline := time.Now().Add(s.opts.TakeoverWait)
	for {
		conn, err := s.deps.Upstream.Dial(ctx, ns, name, sub)
		switch {
		case err == nil:
			return conn, nil
		case errors.Is(err, upstream.ErrBusy) && takeover && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return nil, problemf(http.StatusBadGateway, ReasonUpstream, "the request ended")
			case <-time.After(busyRetryInterval):
			}
			continue
		case errors.Is(err, upstream.ErrBusy):
			return nil, problemf(http.StatusConflict, ReasonHeldOutside, "the VM's %s is held by a client that does not use this bridge (virtctl?); close it and retry", sub)
		case errors.Is(err, upstream.ErrNotFound):
			return nil, problemf(http.StatusNotFound, ReasonVMNotFound, "KubeVirt does not know VirtualMachineInstance %s/%s", ns, name)
		case errors.Is(err, upstream.ErrForbidden):
			s.deps.Log.Error(err, "the bridge's ServiceAccount was refused", "vm", ns+"/"+name)
			return nil, problemf(http.StatusBadGateway, ReasonUpstream, "the bridge is not allowed to open the %s; ask your cluster admin to check the bridge's RBAC", sub)
		default:
			s.deps.Log.Error(err, "dial KubeVirt", "vm", ns+"/"+name, "subresource", sub)
			return nil, problemf(http.StatusBadGateway, ReasonUpstream, "KubeVirt did not open the %s; try again", sub)
		}
	}
}

// lostEnding is the close frame for a session whose Lease went elsewhere.
func lostEnding(reason error) relay.Ending {
	var to session.TakenOver
	if errors.As(reason, &to) {
		return relay.Ending{Code: relay.CodeTakenOver, Reason: fmt.Sprintf("taken over by another user (%s)", to.By)}
	}
	return relay.Ending{Code: relay.CodeSessionLost, Reason: "the bridge lost this session's lease; reconnect"}
}

// refuse answers p in the form the client can read: a browser that sent its
// token in the subprotocol gets a close frame 4000+status after an upgrade,
// everyone else an HTTP status with a Status body. A wrong Origin is never
// upgraded.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, m mode, cred auth.Credential, p *Problem) {
	s.metrics.requests.WithLabelValues(m.name, p.Reason).Inc()
	if !cred.ViaSubprotocol || p.Reason == ReasonOriginForbidden || !websocket.IsWebSocketUpgrade(r) {
		p.write(w)
		return
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws := relay.NewWS(conn, relay.WSOptions{ReadLimit: 1 << 10, PingInterval: s.opts.PingInterval, WriteTimeout: s.opts.WriteTimeout})
	_ = ws.CloseAndDrain(relay.CodeHTTPBase+p.Status, p.closeReason())
}
