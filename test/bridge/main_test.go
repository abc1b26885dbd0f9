package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/sshd"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

const (
	bridgeNS = bridgestack.Namespace
	userNS   = "team-a"
	// leaseDuration is short so a lost replica's slots free quickly.
	leaseDuration = 3 * time.Second
)

// Everything the tests share, started once in TestMain.
var (
	cp       *testenv.ControlPlane
	kube     kubernetes.Interface
	admin    client.Client
	handler  *virthandler.Server
	stack    *bridgestack.Stack
	sshd1    *sshd.Server
	bridgeSA *rest.Config
	logs     = &logBuffer{}
	// replicaA and replicaB are two bridge replicas sharing the Leases.
	replicaA, replicaB *httptest.Server
	// tokens of the test users, by name.
	tokens = map[string]string{}
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bridge tests:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cp, err = testenv.StartControlPlane(testenv.WithAggregation()); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	// Stop the bridge replicas' watches before the API server.
	defer cancel()
	root, err := testenv.RepoRoot()
	if err != nil {
		return 0, err
	}
	if _, err := crenvtest.InstallCRDs(cp.Config, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "internal", "testenv", "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return 0, fmt.Errorf("install CRDs: %w", err)
	}
	kube = kubernetes.NewForConfigOrDie(cp.Config)
	if admin, err = client.New(cp.Config, client.Options{Scheme: bridge.NewScheme()}); err != nil {
		return 0, err
	}

	virtAPI := virthandler.Options{Client: admin, OnStart: playStart}
	if stack, err = bridgestack.Start(ctx, cp.Config, cp.FrontProxy, root, bridgestack.WithVirtAPI(virtAPI)); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, stack.Stop()) }()
	handler = stack.VirtAPI
	stack.Attach(userNS, "ws1")
	if sshd1, err = sshd.Start(ctx, sshd.Options{}); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, sshd1.Stop()) }()

	if err := setUpCluster(ctx); err != nil {
		return 0, err
	}
	if replicaA, err = startReplica(ctx, "replica-a", bridge.Options{}); err != nil {
		return 0, err
	}
	defer replicaA.Close()
	if replicaB, err = startReplica(ctx, "replica-b", bridge.Options{}); err != nil {
		return 0, err
	}
	defer replicaB.Close()
	code = m.Run()
	if leaked := secretsIn(logs.String()); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "the bridge logged secrets: %v\n", leaked)
		code = 1
	}
	return code, nil
}

// secretsIn names the tokens and keys that appear in text.
func secretsIn(text string) []string {
	var leaked []string
	for user, tok := range tokens {
		if strings.Contains(text, tok) {
			leaked = append(leaked, "the token of "+user)
		}
	}
	if strings.Contains(text, "PRIVATE KEY") || strings.Contains(text, sshd1.Password) {
		leaked = append(leaked, "an SSH secret")
	}
	return leaked
}

// setUpCluster makes the users and the VMs.
func setUpCluster(ctx context.Context) error {
	bridgeSA = stack.BridgeConfig
	// alice and bob use workstations in team-a; eve has no role.
	var err error
	for _, u := range []string{"alice", "bob", "eve"} {
		if tokens[u], err = stack.Token(ctx, userNS, u); err != nil {
			return err
		}
	}
	for _, u := range []string{"alice", "bob"} {
		if err := stack.BindWorkstationUser(ctx, userNS, u); err != nil {
			return err
		}
	}
	return createVMs(ctx)
}

// startReplica runs one bridge replica, wired as cmd/bridge wires it.
func startReplica(ctx context.Context, name string, opts bridge.Options) (*httptest.Server, error) {
	opts.PingInterval = time.Second
	opts.SSHPort = sshPort()
	reg := prometheus.NewRegistry()
	srv, err := bridge.NewFromConfig(ctx, bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: name, LeaseDuration: leaseDuration, Options: opts,
		Log: logs.logger().WithName(name), Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	hs := httptest.NewServer(srv)
	registries.Store(hs.URL, reg)
	return hs, nil
}

// registries are the replicas' metrics, by server URL: cmd/bridge serves
// them on an address of their own, never on the sessions' port.
var registries sync.Map

// scrape is the replica's metrics in Prometheus' text format.
func scrape(t *testing.T, server string) string {
	t.Helper()
	reg, ok := registries.Load(server)
	if !ok {
		t.Fatalf("no metrics registry for %s", server)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg.(*prometheus.Registry), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics of %s: %d", server, rec.Code)
	}
	return rec.Body.String()
}

// logBuffer collects the bridge's log lines, to prove no secret is logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintln(&l.buf, prefix, args)
	}, funcr.Options{Verbosity: 10})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
