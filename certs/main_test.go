package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/certs"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks"
)

var (
	shared    testenv.Shared
	cp        *testenv.ControlPlane
	adminOnce sync.Once
	admin     kubernetes.Interface
)

func TestMain(m *testing.M) { shared.Main(m) }

// controlPlane starts the package's control plane on first use, so that
// the unit tests and fuzzing run without one.
func controlPlane(t *testing.T) {
	t.Helper()
	c := shared.Get(t)
	adminOnce.Do(func() {
		cfg := rest.CopyConfig(c.Config)
		// The probes below poll continuously; client-go's default of 5
		// requests per second would throttle them, not the API server.
		cfg.QPS, cfg.Burst = 500, 1000
		cp, admin = c, kubernetes.NewForConfigOrDie(cfg)
	})
}

// Timeouts of the integration tests.
const (
	// rbacTimeout: the API server's RBAC authorizer learns of new bindings
	// through an informer.
	rbacTimeout = 10 * time.Second
	// settleTimeout bounds event-driven convergence (a watch event, a
	// reconcile, a patch): well under a second normally, more on a loaded
	// 2-core machine.
	settleTimeout = 10 * time.Second
	// poll is how often the tests look.
	poll = 20 * time.Millisecond
)

// ensureNamespace creates ns unless it exists.
func ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	_, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// userWithRules creates a user bound to rules in namespace ns and to
// clusterRules cluster-wide, waits until the authorizer applies them, and
// returns its config. wrap, when set, wraps its transport.
func userWithRules(t *testing.T, name, ns string, rules, clusterRules []rbacv1.PolicyRule, wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	t.Helper()
	ctx := t.Context()
	subject := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subject,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(clusterRules) > 0 {
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: clusterRules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subject,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := cp.AddUser(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	return cfg
}

// waitRBAC waits until cfg may get the Secret (NotFound counts: the check
// passed).
func waitRBAC(t *testing.T, cfg *rest.Config, ns, secret string) {
	t.Helper()
	c := kubernetes.NewForConfigOrDie(cfg)
	eventually(t, rbacTimeout, "RBAC on Secret "+ns+"/"+secret, func() error {
		_, err := c.CoreV1().Secrets(ns).Get(t.Context(), secret, metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// eventually polls cond until it returns nil, and fails the test with its
// last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(poll)
	}
}

// replica is one webhook replica: a Rotator and, when serve is set, the
// real webhook server reading its cert dir.
type replica struct {
	rotator *certs.Rotator
	certDir string
	addr    string // of the webhook server; empty when not serving
	port    int
}

// startReplica bootstraps and starts a Rotator on cfg, and the webhook
// server with handlers (path → handler) when handlers is not nil. Both
// stop at the end of the test. afterBootstrap, when set, runs between
// Bootstrap and Start.
func startReplica(t *testing.T, cfg *rest.Config, opts certs.Options, handlers map[string]admission.Handler, afterBootstrap func(*replica)) *replica {
	t.Helper()
	opts.CertDir = filepath.Join(t.TempDir(), "serving-certs")
	opts.Logger = testr.New(t)
	if opts.Recorder == nil {
		opts.Recorder = recorder(t, cfg)
	}
	r, err := certs.New(kubernetes.NewForConfigOrDie(cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	rep := &replica{rotator: r, certDir: opts.CertDir}
	if afterBootstrap != nil {
		afterBootstrap(rep)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait() // nothing logs through t once the test is over
	})
	wg.Go(func() {
		if err := r.Start(ctx); err != nil {
			t.Errorf("rotator: %v", err)
		}
	})
	if handlers == nil {
		return rep
	}
	rep.port = freePort(t)
	rep.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(rep.port))
	srv := webhooks.NewServer(webhooks.ServerOptions{Host: "127.0.0.1", Port: rep.port, CertDir: opts.CertDir})
	for path, h := range handlers {
		srv.Register(path, &webhook.Admission{Handler: h})
	}
	wg.Go(func() {
		if err := srv.Start(ctx); err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	eventually(t, settleTimeout, "webhook server started", func() error { return srv.StartedChecker()(nil) })
	return rep
}

// recorder returns an events.k8s.io recorder writing as cfg's user.
func recorder(t *testing.T, cfg *rest.Config) events.EventRecorder {
	t.Helper()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	b.StartRecordingToSink(ctx.Done())
	t.Cleanup(func() { cancel(); b.Shutdown() })
	return b.NewRecorder(scheme.Scheme, "virtstation-certs")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // only probing for a free port
	return l.Addr().(*net.TCPAddr).Port
}

// handshake dials addr trusting exactly bundle, as the API server does for
// a webhook whose caBundle is bundle, and returns the leaf served.
func handshake(addr, serverName string, bundle []byte) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("empty caBundle")
	}
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }() // only the handshake matters
	return conn.ConnectionState().PeerCertificates[0], nil
}

// readyCheck adapts Rotator.ReadyCheck for eventually.
func readyCheck(r *certs.Rotator) func() error {
	return func() error { return r.ReadyCheck(nil) }
}
