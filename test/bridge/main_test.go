package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/test/envtest"
	"github.com/virtstation/virtstation/test/qemu"
	"github.com/virtstation/virtstation/test/sshd"
	"github.com/virtstation/virtstation/test/virthandler"
)

const (
	bridgeNS = "virtstation-system"
	userNS   = "team-a"
	// leaseDuration is short so a lost replica's slots free quickly.
	leaseDuration = 3 * time.Second
)

// Everything the tests share, started once in TestMain.
var (
	cp       *envtest.ControlPlane
	kube     kubernetes.Interface
	admin    client.Client
	handler  *virthandler.Server
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
	if cp, err = envtest.StartControlPlane(envtest.WithAggregation()); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()
	// Stop the bridge replicas' watches before the API server.
	defer cancel()
	root, err := envtest.RepoRoot()
	if err != nil {
		return 0, err
	}
	if _, err := crenvtest.InstallCRDs(cp.Config, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "test", "envtest", "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return 0, fmt.Errorf("install CRDs: %w", err)
	}
	kube = kubernetes.NewForConfigOrDie(cp.Config)
	if admin, err = client.New(cp.Config, client.Options{Scheme: bridge.NewScheme()}); err != nil {
		return 0, err
	}

	dir, err := os.MkdirTemp("", "virtstation-bridge-test-")
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	vm, err := qemu.Start(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, vm.Stop()) }()
	handler, err = virthandler.Start(ctx, virthandler.Options{
		FrontProxyCA: cp.FrontProxy.CA,
		AllowedNames: []string{envtest.FrontProxyClientName},
		DNSNames:     []string{envtest.SubresourceServerName},
	})
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, handler.Close()) }()
	handler.Register(userNS, "ws1", virthandler.Target{Console: vm.SerialSocket, VNC: vm.VNCSocket})
	if err := envtest.RegisterSubresourceAPI(ctx, cp.Config, handler.Port(), handler.CABundle()); err != nil {
		return 0, err
	}
	if sshd1, err = sshd.Start(ctx, sshd.Options{}); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, sshd1.Stop()) }()

	if err := setUpCluster(ctx, root, dir); err != nil {
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

// setUpCluster makes the namespaces, the bridge's ServiceAccount with the
// shipped RBAC and a token file, the users, and the VMs.
func setUpCluster(ctx context.Context, root, dir string) error {
	for _, ns := range []string{bridgeNS, userNS} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := applyYAML(ctx, filepath.Join(root, "config", "rbac", "bridge_role.yaml"), ""); err != nil {
		return err
	}
	if err := applyYAML(ctx, filepath.Join(root, "config", "rbac", "workstation_user_role.yaml"), ""); err != nil {
		return err
	}
	tok, err := serviceAccountToken(ctx, bridgeNS, "virtstation-bridge")
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(dir, "bridge-token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return err
	}
	bridgeSA = &rest.Config{Host: cp.Config.Host, BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData}}

	// alice and bob use workstations in team-a; eve has no role.
	for _, u := range []string{"alice", "bob", "eve"} {
		if tokens[u], err = serviceAccountToken(ctx, userNS, u); err != nil {
			return err
		}
	}
	for _, u := range []string{"alice", "bob"} {
		if err := bindWorkstationUser(ctx, userNS, u); err != nil {
			return err
		}
	}
	return createVMs(ctx)
}

// startReplica runs one bridge replica, wired as cmd/bridge wires it.
func startReplica(ctx context.Context, name string, opts bridge.Options) (*httptest.Server, error) {
	opts.PingInterval = time.Second
	opts.SSHPort = sshPort()
	srv, err := bridge.NewFromConfig(ctx, bridgeSA, bridge.Config{
		Namespace: bridgeNS, Replica: name, LeaseDuration: leaseDuration, Options: opts,
		Log: logs.logger().WithName(name),
	})
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(srv), nil
}

// serviceAccountToken creates a ServiceAccount and a token for it, as
// `kubectl create token` does.
func serviceAccountToken(ctx context.Context, ns, name string) (string, error) {
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
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
