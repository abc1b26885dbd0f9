package virthandler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readHeaderTimeout bounds a request's headers; the API server sends them at
// once.
const readHeaderTimeout = 10 * time.Second

// Options configures Start.
type Options struct {
	// FrontProxyCA is the PEM CA that signs kube-apiserver's proxy client
	// certificate (envtest.FrontProxy.CA). When set, a caller without a
	// client certificate from it gets 401; when nil, anyone may call and
	// the identity headers are taken on trust.
	FrontProxyCA []byte
	// AllowedNames are the client certificate common names accepted, like
	// --requestheader-allowed-names; empty accepts any the CA signed.
	AllowedNames []string
	// DNSNames are added to the serving certificate besides localhost and
	// 127.0.0.1: the aggregator checks <service>.<namespace>.svc
	// (envtest.SubresourceServerName).
	DNSNames []string
	// Client, when set, reaches the API server where the VirtualMachines
	// and VirtualMachineInstances are stored (its scheme must know
	// kubevirtv1): start and stop change the stored VM as virt-api does,
	// and userlist and guestosinfo check the stored VMI. Without it, start
	// and stop answer 500 and the guest agent calls skip those checks.
	Client client.Client
	// OnStart and OnStop, when set, are called after a start or stop was
	// accepted (not a dry run), with the VM as patched, on a goroutine of
	// their own that Close waits for; ctx ends with the server. A test
	// plays virt-controller and virt-handler there: create the VMI and
	// Register a QEMU on start; Unregister and delete the VMI on stop.
	OnStart, OnStop func(ctx context.Context, vm *kubevirtv1.VirtualMachine)
}

// Target is where a VMI's subresources lead: QEMU's unix sockets. An empty
// Console or VNC means the VMI has no such device (400, as virt-api
// answers); an empty QMP means screenshots fail (500, as a failed libvirt
// call does).
type Target struct {
	Console string
	VNC     string
	// QMP is QEMU's monitor, where screenshots come from (qemu.Screendump).
	QMP string
	// VNCTap, when set, gives each VNC connection a Tap that sees its bytes:
	// what the client truly sent QEMU, for tests to look at.
	VNCTap func() Tap
}

// Tap sees one piped connection's bytes, each chunk before it is forwarded
// (the order package rfb's parsers need): FromClient what the client sends
// to QEMU, FromVM what QEMU answers. Each method is called from one
// goroutine of the connection's two; a Tap must not keep p.
type Tap interface {
	FromClient(p []byte)
	FromVM(p []byte)
}

func (t Target) socket(kind Kind) string {
	if kind == VNC {
		return t.VNC
	}
	return t.Console
}

// Server is a running fake virt-handler. Its methods are safe for concurrent
// use; each piped connection has one goroutine per direction, and all of
// them end when Close returns.
type Server struct {
	ctx      context.Context
	cancel   context.CancelFunc
	srv      *http.Server
	ln       net.Listener
	port     int
	caBundle []byte
	served   chan error

	opts    Options
	mu      sync.Mutex
	targets map[[2]string]Target
	agents  map[[2]string]guestAgent
	closed  bool // guards inflight.Add against a concurrent Close

	sessions *sessions
	calls    callLog
	inflight sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start serves on 127.0.0.1 at a free port until Close, or until ctx is
// done.
func Start(ctx context.Context, opts Options) (*Server, error) {
	cert, caBundle, err := servingCert(opts.DNSNames)
	if err != nil {
		return nil, err
	}
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if opts.FrontProxyCA != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.FrontProxyCA) {
			return nil, errors.New("virthandler: FrontProxyCA holds no PEM certificate")
		}
		tlsConfig.ClientCAs = pool
		tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
	}
	discovery, err := discoveryDocument()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("listener address %v is not TCP", ln.Addr())
	}
	s := &Server{
		ln:       ln,
		port:     addr.Port,
		caBundle: caBundle,
		served:   make(chan error, 1),
		opts:     opts,
		targets:  map[[2]string]Target{},
		agents:   map[[2]string]guestAgent{},
		sessions: newSessions(),
	}
	sctx, cancel := context.WithCancel(ctx)
	s.ctx, s.cancel = sctx, cancel
	s.srv = &http.Server{
		Handler:           s.authenticate(opts, s.routes(discovery)),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return sctx },
	}
	go func() { s.served <- s.srv.ServeTLS(ln, "", "") }()
	context.AfterFunc(sctx, func() { _ = s.Close() })
	return s, nil
}

// routes dispatches through a table of Go 1.22 patterns; anything else is
// 404 (405 for a known path with another method).
func (s *Server) routes(discovery []byte) *http.ServeMux {
	vmi := basePath + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
	vm := basePath + "/namespaces/{namespace}/virtualmachines/{name}/"
	table := map[string]http.Handler{
		"GET " + vmi + "console":        s.stream(Console),
		"GET " + vmi + "vnc":            s.stream(VNC),
		"GET " + vmi + "vnc/screenshot": http.HandlerFunc(s.screenshot),
		"PUT " + vm + "restart":         http.HandlerFunc(s.restart),
		"PUT " + vm + "start":           http.HandlerFunc(s.start),
		"PUT " + vm + "stop":            http.HandlerFunc(s.stop),
		"GET " + vmi + "userlist":       http.HandlerFunc(s.userList),
		"GET " + vmi + "guestosinfo":    http.HandlerFunc(s.guestOSInfo),
		"GET " + basePath + "/version":  http.HandlerFunc(serveVersion),
		"GET " + basePath: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(discovery)
		}),
		"GET /healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}),
	}
	mux := http.NewServeMux()
	for pattern, h := range table {
		mux.Handle(pattern, h)
	}
	return mux
}

// authenticate admits only the API server's front proxy when opts name its
// CA; /healthz stays open, as a probe's would.
func (s *Server) authenticate(opts Options, next http.Handler) http.Handler {
	if opts.FrontProxyCA == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !fromFrontProxy(r.TLS, opts.AllowedNames) {
			writeStatus(w, apierrors.NewUnauthorized("the caller is not kube-apiserver's front proxy (no client certificate from the front-proxy CA with an allowed name)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromFrontProxy says whether the connection presented a client certificate
// the front-proxy CA verified, with an allowed common name.
func fromFrontProxy(state *tls.ConnectionState, allowedNames []string) bool {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return false
	}
	return len(allowedNames) == 0 || slices.Contains(allowedNames, state.VerifiedChains[0][0].Subject.CommonName)
}

// fail records call with err's status and answers with it.
func (s *Server) fail(w http.ResponseWriter, call Call, err *apierrors.StatusError) {
	call.Status = int(err.Status().Code)
	s.calls.add(call)
	writeStatus(w, err)
}

// writeStatus answers a metav1.Status, as Kubernetes API servers do.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	body, merr := json.Marshal(&status)
	if merr != nil {
		http.Error(w, status.Message, int(status.Code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

// Register routes the subresources of VMI namespace/name (and restarts of
// the VM of that name) to t, replacing any earlier target.
func (s *Server) Register(namespace, name string, t Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[[2]string{namespace, name}] = t
}

// Unregister forgets the VMI, as if it had stopped: its open connections
// end, and new calls get 404.
func (s *Server) Unregister(namespace, name string) {
	s.mu.Lock()
	delete(s.targets, [2]string{namespace, name})
	s.mu.Unlock()
	s.sessions.stopVMI(namespace, name)
}

// enter counts a handler that may outlive the HTTP server's Close (hijacked
// connections); false means the server is closing.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *Server) target(namespace, name string) (Target, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.targets[[2]string{namespace, name}]
	return t, ok
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the port the server listens on.
func (s *Server) Port() int { return s.port }

// URL is the server's base URL.
func (s *Server) URL() string {
	return "https://" + net.JoinHostPort("localhost", strconv.Itoa(s.Port()))
}

// CABundle is the PEM CA of the serving certificate, for an APIService's
// caBundle or a test client.
func (s *Server) CABundle() []byte { return s.caBundle }

// Calls returns every call so far, oldest first.
func (s *Server) Calls() []Call { return s.calls.snapshot() }

// Restarts returns the restart calls that were accepted, oldest first.
func (s *Server) Restarts() []Call { return s.Accepted(Restart) }

// Accepted returns the calls of a kind that were answered 202 Accepted
// (restart, start, stop), oldest first.
func (s *Server) Accepted(kind Kind) []Call {
	var out []Call
	for _, c := range s.calls.snapshot() {
		if c.Kind == kind && c.Status == http.StatusAccepted {
			out = append(out, c)
		}
	}
	return out
}

// Open counts the piped connections of a kind for a VMI: 1 while a client
// is connected, briefly 2 while a new connection displaces an old one.
func (s *Server) Open(namespace, name string, kind Kind) int {
	return s.sessions.open(connKey{namespace: namespace, name: name, kind: kind})
}

// Close stops serving, ends every piped connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		err := s.srv.Close()
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("serve: %w", serr))
		}
		s.inflight.Wait()
		s.closeErr = err
	})
	return s.closeErr
}
