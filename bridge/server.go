package bridge

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/sshbridge"
	"github.com/virtstation/virtstation/bridge/ui"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// Deps are the bridge's connections to the cluster.
type Deps struct {
	// Kube reviews tokens and access.
	Kube kubernetes.Interface
	// Reader reads VMs and VMIs (uncached: sessions are rare).
	Reader client.Reader
	// Upstream dials KubeVirt's subresources as the bridge.
	Upstream *upstream.Dialer
	// Sessions holds the one-session-per-VM-per-mode Leases; Start it first.
	Sessions *session.Registry
	// HostKeys pins each VM's SSH host key.
	HostKeys sshbridge.HostKeyStore
	// Log receives session starts and endings, never tokens or keys.
	Log logr.Logger
	// Registerer takes the bridge's metrics; nil makes a private registry.
	Registerer prometheus.Registerer
	// Ready reports readiness for /readyz; nil is always ready.
	Ready func() error
	// Activity records user input and keep-running leases in the VMs'
	// activity Leases (package activity); nil records nothing, and
	// keep-running requests are refused.
	Activity *activity.Recorder
}

// Server is the bridge's HTTP handler. It is safe for concurrent use.
type Server struct {
	opts     Options
	deps     Deps
	origins  auth.OriginPolicy
	authn    *auth.Authenticator
	authz    *auth.Authorizer
	metrics  *metrics
	upgrader websocket.Upgrader
	mux      *http.ServeMux
	// ctx ends every session when the bridge shuts down.
	ctx context.Context
	// sessionLog is deps.Log for sessions, which add their values lazily.
	sessionLog logr.Logger
	// running counts the sessions being set up or running, for Wait.
	running sessionCount
	// starts are the VMs this replica started, for the start-to-connected
	// metric (lifecycle.go).
	starts startTimes
}

// New builds a Server; ctx bounds every session it serves.
func New(ctx context.Context, opts Options, deps Deps) (*Server, error) {
	if deps.Kube == nil || deps.Reader == nil || deps.Upstream == nil || deps.Sessions == nil || deps.HostKeys == nil {
		return nil, errors.New("bridge: Kube, Reader, Upstream, Sessions and HostKeys are required")
	}
	origins, err := auth.NewOriginPolicy(opts.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	s := &Server{
		opts:    opts.withDefaults(),
		deps:    deps,
		origins: origins,
		authn:   auth.NewAuthenticator(deps.Kube.AuthenticationV1().TokenReviews(), nil),
		authz:   auth.NewAuthorizer(deps.Kube.AuthorizationV1().SubjectAccessReviews()),
		metrics: newMetrics(deps.Registerer),
		ctx:     ctx,
		// Not deps.Log.WithValues per session: see newLazyLogger.
		sessionLog: newLazyLogger(deps.Log),
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: handshakeTimeout,
		Subprotocols:     clientSubprotocols,
		// A read buffer of its own: with ReadBufferSize 0 gorilla would keep
		// net/http's 4 KiB reader, and through it net/http's whole
		// connection, for the session's life. Write buffers are pooled, so
		// an idle session holds none (gorilla writes the handshake through
		// net/http's writer, which it then drops).
		ReadBufferSize:  relay.ReadBufferSize,
		WriteBufferSize: relay.WriteBufferSize,
		WriteBufferPool: relay.WriteBufferPool(),
		// The Origin was checked before the upgrade, with the allowlist.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	s.mux = s.routes()
	return s, nil
}

// Wait blocks until every session has ended, or ctx ends. Sessions run on
// goroutines of their own, which http.Server.Shutdown does not wait for:
// once the Server's ctx (given to New) has ended, each session closes with
// 1001 (the bridge is going away) and gives its Lease back, and Wait sees
// them through.
func (s *Server) Wait(ctx context.Context) error { return s.running.wait(ctx) }

// sessionCount counts sessions; idle is closed whenever the count is zero.
type sessionCount struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // nil while none was ever counted
}

func (l *sessionCount) add() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		l.idle = make(chan struct{})
	}
	l.n++
}

func (l *sessionCount) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.n == 0 {
		close(l.idle)
	}
}

func (l *sessionCount) wait(ctx context.Context) error {
	l.mu.Lock()
	idle := l.idle
	l.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// route is one row of the routing table.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes is the whole HTTP surface, in one table.
func (s *Server) routes() *http.ServeMux {
	const vm = "/api/v1/namespaces/{namespace}/virtualmachines/{name}"
	table := []route{
		{"GET " + vm + "/console", s.session(modeConsole, true)},
		{"GET " + vm + "/vnc", s.session(modeVNC, true)},
		{"GET " + vm + "/ssh", s.session(modeSSH, true)},
		{"GET " + vm + "/sessions", s.listSessions},
		{"POST " + vm + "/sessions/{mode}/takeover", s.takeOver},
		{"POST " + vm + "/restart", s.restart},
		{"POST " + vm + "/keep-running", s.keepRunning},
		// Start on connect and the progress page (lifecycle.go); never on
		// KubeVirt's own paths below.
		{"POST " + vm + "/start", s.startVM},
		{"GET " + vm + "/status", s.vmStatusHandler},
		// KubeVirt's own paths, with KubeVirt's meaning, so that virtctl and
		// KubeVirt UIs can point at the bridge unchanged (kubevirt.go).
		{"GET /apis/" + subresourcesGroup, s.discoverGroup},
		{"GET /apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}", s.getVMI},
		{"GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }},
		{"GET /readyz", s.readyz},
	}
	for _, v := range kubeVirtVersions {
		group := "/apis/" + subresourcesGroup + "/" + v
		vmi := group + "/namespaces/{namespace}/virtualmachineinstances/{name}"
		table = append(table,
			route{"GET " + group, s.discoverVersion(v)},
			route{"GET " + group + "/version", s.kubeVirtVersion},
			route{"GET " + vmi + "/console", s.session(modeConsole, false)},
			route{"GET " + vmi + "/vnc", s.session(modeVNC, false)},
			route{"GET " + vmi + "/vnc/screenshot", s.screenshot},
		)
	}
	mux := http.NewServeMux()
	for _, r := range table {
		mux.HandleFunc(r.pattern, r.handler)
	}
	mux.Handle("GET /ui/", ui.Handler())
	return mux
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.deps.Ready != nil {
		if err := s.deps.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}
