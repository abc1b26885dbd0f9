package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/activity"
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
//
// The handler sets the session up (authentication, the Lease, the upstream
// dial, the upgrade, an SSH hello) and returns; the session then runs on a
// goroutine of the Server's own (see live). Returning lets net/http drop
// what it keeps for a request while its handler runs: the connection's
// 4 KiB reader and writer, the response and the request, which are most of
// an idle session's memory otherwise.
func (s *Server) session(m mode, byVM bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Counted from the start, so that shutdown waits for a session the
		// handler is still setting up, whose connection net/http no longer
		// tracks once it is hijacked.
		s.running.add()
		l := s.open(w, r, m, byVM)
		if l == nil {
			s.running.done()
			return
		}
		go func() { //nolint:contextcheck // the session outlives the request; release derives from the Server's context with WithoutCancel
			defer s.running.done()
			l.run()
		}()
	}
}

// live is a session whose WebSocket is upgraded: what it needs to run to
// its end, with nothing of the HTTP request it came from.
type live struct {
	s    *Server
	m    mode
	sess *session.Session
	log  logr.Logger
	// client and up are the two sides; opts is the relay's policy.
	client *relay.WS
	up     relay.Endpoint
	opts   relay.Options
	// vm is the VNC session's series, deleted at the end; nil for the
	// other modes.
	vm *vncSession
}

// open sets a session up, refusing the client (and releasing what it took)
// when it cannot be. The live session it returns holds the Lease.
func (s *Server) open(w http.ResponseWriter, r *http.Request, m mode, byVM bool) *live {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	user, cred, tgt, p := s.admit(r, m, byVM)
	if p != nil {
		s.refuse(w, r, m, cred, p)
		return nil
	}
	takeover, takeDisplay := takeOverAsked(r, m, byVM)
	// resolve has read the VMI: a Lease is only ever written for one that
	// exists, and names its uid.
	sess, p := s.acquire(r.Context(), session.Key{Namespace: ns, Name: name, Mode: m.name, VMI: tgt.VMI.UID}, user.Name, takeover)
	if p != nil {
		s.refuse(w, r, m, cred, p)
		return nil
	}
	l := &live{s: s, m: m, sess: sess, log: s.sessionLog.WithValues("mode", m.name, "vm", ns+"/"+name, "user", user.Name)}
	defer func() { //nolint:contextcheck // release frees the Lease even after the request's context ended; it derives from the Server's with WithoutCancel
		if l.client == nil { // not handed over: the session never started
			l.release()
		}
	}()

	var up relay.Endpoint
	if m.sub != "" {
		conn, p := s.dialUpstream(r.Context(), ns, name, m.sub, takeover, upstream.DialOptions{TakeDisplay: takeDisplay})
		if p != nil {
			s.refuse(w, r, m, cred, p)
			return nil
		}
		up = relay.NewWS(conn, relay.WSOptions{ReadLimit: upstreamReadLimit, PingInterval: s.opts.PingInterval, WriteTimeout: s.opts.WriteTimeout, Coalesce: true})
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		if up != nil {
			_ = up.Close(websocket.CloseNormalClosure, "client handshake failed")
		}
		return nil // the upgrader answered the client
	}
	s.metrics.requests.WithLabelValues(m.name, "OK").Inc()
	s.sessionConnected(ns, name)
	client := relay.NewWS(conn, relay.WSOptions{ReadLimit: m.readLimit, PingInterval: s.opts.PingInterval, WriteTimeout: s.opts.WriteTimeout})
	if !s.attach(r, l, client, up, tgt) {
		return nil
	}
	return l
}

// admit checks the request before the session takes anything: a WebSocket
// handshake, valid names, a user allowed to open m, and a target that runs.
// cred is whatever authentication found, for refuse.
func (s *Server) admit(r *http.Request, m mode, byVM bool) (auth.User, auth.Credential, target, *Problem) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !websocket.IsWebSocketUpgrade(r) {
		return auth.User{}, auth.Credential{}, target{}, problemf(http.StatusBadRequest, ReasonBadRequest, "this endpoint speaks WebSocket only")
	}
	if p := s.checkNames(r); p != nil {
		return auth.User{}, auth.Credential{}, target{}, p
	}
	user, cred, p := s.who(r, auth.KubeVirtAccess(m.action, ns, name)...)
	if p != nil {
		return user, cred, target{}, p
	}
	tgt, p := resolve(r.Context(), s.deps.Reader, ns, name, byVM, m)
	return user, cred, tgt, p
}

// attach hands l its two sides, client and up, and the relay's policy for
// its mode: the RFB-aware interceptor for VNC; for SSH, the shell it opens
// on the guest over client, or false when that ended the session first.
func (s *Server) attach(r *http.Request, l *live, client *relay.WS, up relay.Endpoint, tgt target) bool {
	m, sess := l.m, l.sess
	filter := relay.ClientFilter(relay.ConsoleFilter)
	var interceptor relay.Interceptor
	meter := relay.Meter(s.metrics.meter(m.name))
	switch m.name {
	case modeVNC.name: // the interceptor replaces the filter
		interceptor, meter = s.vncProxy(r, l, meter)
	case modeSSH.name:
		var end *relay.Ending
		up, filter, end = s.openSSH(r.Context(), client, tgt, l.log)
		if end != nil {
			s.metrics.ended(m.name, end.Code)
			return false
		}
	}
	l.client, l.up = client, up
	l.opts = relay.Options{
		IdleTimeout:  s.opts.IdleTimeout,
		Filter:       filter,
		Interceptor:  interceptor,
		Lost:         sess.Context(),
		LostEnding:   func() relay.Ending { return lostEnding(sess.LostReason()) },
		Meter:        meter,
		UpstreamName: m.upstreamName,
		// User input is the VM's activity: keys, pointer and clipboard on
		// VNC (the interceptor's call), typed bytes on the console and in
		// SSH, never a resize.
		Input: s.deps.Activity.For(r.PathValue("namespace"), r.PathValue("name"), activity.Source(m.name)),
	}
	return true
}

// vncProxy sets up the RFB-aware layer of l, a VNC session, with the
// options the request asked for, and its metrics series; it returns the
// interceptor and the meter that feeds the series too.
func (s *Server) vncProxy(r *http.Request, l *live, meter relay.Meter) (relay.Interceptor, relay.Meter) {
	l.vm = s.metrics.vncSession(r.PathValue("namespace"), r.PathValue("name"))
	viewOnly := viewOnlyAsked(r)
	if viewOnly {
		l.log = l.log.WithValues("viewOnly", true)
	}
	return vnc.NewProxy(vnc.Options{
		Adaptive:    adaptive(r, s.opts.VNCAdaptive),
		ViewOnly:    viewOnly,
		Observer:    l.vm,
		Log:         l.log,
		LogInterval: s.opts.VNCLogInterval,
	}), l.vm.meter(meter)
}

// run relays the session until it ends, counts and logs the ending, and
// gives the Lease back. It runs after the handler has returned: it
// depends on the Server's ctx, never the request's.
func (l *live) run() {
	defer l.release()
	if l.vm != nil {
		defer l.vm.end()
	}
	s := l.s
	l.log.Info("session started", "since", l.sess.Since)
	s.metrics.active.WithLabelValues(l.m.name).Inc()
	// Counted and logged as soon as the ending is known, before the close
	// frames go out; Relay returns once upstream has answered.
	l.opts.Ended = func(end relay.Ending) {
		s.metrics.active.WithLabelValues(l.m.name).Dec()
		s.metrics.ended(l.m.name, end.Code)
		l.log.Info("session ended", "code", end.Code, "reason", end.Reason)
	}
	relay.Relay(s.ctx, l.client, l.up, l.opts)
}

// release gives the session's Lease back, within releaseTimeout even when
// the bridge is shutting down.
func (l *live) release() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.s.ctx), releaseTimeout)
	defer cancel()
	if err := l.sess.Release(ctx); err != nil {
		l.log.Error(err, "release session")
	}
}

// takeOverAsked says whether the client asked to take the session over: the
// bridge's own ?takeover=true, or, on KubeVirt's VNC path, KubeVirt's
// preserveSession=false, which virtctl vnc sends unless --preserve-session.
// KubeVirt parses it with strconv.ParseBool and takes anything but true as
// false; absent, the bridge guards the session (KubeVirt would drop the
// holder), which is the session guarding KubeVirt UIs gain through it.
// takeDisplay passes KubeVirt's meaning on: the display is taken from a
// client outside the bridge too.
func takeOverAsked(r *http.Request, m mode, byVM bool) (takeover, takeDisplay bool) {
	q := r.URL.Query()
	if !byVM && m.name == modeVNC.name && q.Has("preserveSession") {
		if preserve, err := strconv.ParseBool(q.Get("preserveSession")); err != nil || !preserve {
			return true, true
		}
	}
	return q.Get("takeover") == "true", false
}

// adaptive is the session's choice of the adaptive VNC controller: the
// query parameter, else the deployment's default.
func adaptive(r *http.Request, def bool) bool {
	if on, ok := queryFlag(r, "adaptive"); ok {
		return on
	}
	return def
}

// viewOnlyAsked says whether the client opened the VNC session view only,
// with noVNC's parameter name (?view_only=1): the bridge then drops its
// input (vnc.Options.ViewOnly). The session is held and taken over as any
// other; view only changes what it may send, not who holds it.
func viewOnlyAsked(r *http.Request) bool {
	on, _ := queryFlag(r, "view_only")
	return on
}

// queryFlag reads a boolean query parameter; ok is false when it is absent
// or not one of the spellings below.
func queryFlag(r *http.Request, name string) (on, ok bool) {
	switch r.URL.Query().Get(name) {
	case "true", "1", "on", "yes":
		return true, true
	case "false", "0", "off", "no":
		return false, true
	}
	return false, false
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
func (s *Server) dialUpstream(ctx context.Context, ns, name string, sub upstream.Subresource, takeover bool, opts upstream.DialOptions) (*websocket.Conn, *Problem) {
	deadline := time.Now().Add(s.opts.TakeoverWait)
	for {
		conn, err := s.deps.Upstream.Dial(ctx, ns, name, sub, opts)
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

// refuse answers p in the form the client can read. A browser cannot read
// the status of a failed WebSocket handshake, so a handshake from one (it
// sent an Origin, or its token in the subprotocol) is upgraded and closed at
// once with 4000+status and the reason; no byte of a session flows, so this
// holds for a wrong Origin too, which then learns only that it is refused.
// Everyone else (CLIs, virtctl) gets the HTTP status and a Status body.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, m mode, cred auth.Credential, p *Problem) {
	s.metrics.requests.WithLabelValues(m.name, p.Reason).Inc()
	fromBrowser := cred.ViaSubprotocol || r.Header.Get("Origin") != ""
	if !fromBrowser || !websocket.IsWebSocketUpgrade(r) {
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
