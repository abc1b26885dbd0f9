package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/virtstation/virtstation/internal/kvadmission"
	"github.com/virtstation/virtstation/webhooks"
)

// InstallNamespace is where the harness "installs" Virtstation: policy
// ConfigMaps go there.
const InstallNamespace = "virtstation-system"

// KubeVirtNamespace is where KubeVirt is "installed": KubeVirt's admission
// follows the KubeVirt CR there, as virt-api follows the one in its own
// namespace.
const KubeVirtNamespace = "kubevirt"

// ClaimGrace is the webhooks' claim grace: short in tests so released
// claims can be observed quickly.
const ClaimGrace = 3 * time.Second

// AuditInterval is the policy audit's interval: short, so tests see its
// resyncs (and that they write nothing).
const AuditInterval = 2 * time.Second

// webhookReadyTimeout bounds the wait for the in-process webhook server and
// its informers; start-up takes a few seconds on a 2-core machine.
const webhookReadyTimeout = 60 * time.Second

// Env is a running control plane with Virtstation's webhooks installed and
// served in this process.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client talks to the API server directly (no cache).
	Client client.Client
	// Manager runs the webhook server; its cache is what the webhooks see.
	Manager ctrl.Manager
	// RepoRoot is the repository the CRDs and manifests were read from.
	RepoRoot string
	// FrontProxy is the aggregation layer's PKI: aggregated APIs such as
	// the stand-in virt-api can be registered (RegisterSubresourceAPI).
	FrontProxy *FrontProxy
	// WebhookClient is the PKI of the API server's client certificate
	// towards the webhooks; nil when started WithoutWebhookClientCerts.
	WebhookClient *WebhookClientPKI
	// KubeVirt is KubeVirt's own VirtualMachine admission, registered as
	// a validating webhook (see startKubeVirtAdmission).
	KubeVirt *kvadmission.Webhook

	env    *crenvtest.Environment
	tmpDir string
	cancel context.CancelFunc
	done   chan error
}

// Start brings up kube-apiserver and etcd, installs the CRDs and webhook
// configurations, and starts the webhook manager. Call Stop when done.
func Start(ctx context.Context, opts ...StartOption) (*Env, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := binaryAssets(root)
	if err != nil {
		return nil, err
	}
	te := &crenvtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "internal", "testenv", "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook")},
		},
	}
	e := &Env{RepoRoot: root, env: te, done: make(chan error, 1)}
	if e.tmpDir, err = os.MkdirTemp("", "virtstation-envtest-"); err != nil {
		return nil, err
	}
	if e.FrontProxy, err = ConfigureAggregation(te, e.tmpDir); err != nil {
		return nil, errors.Join(err, os.RemoveAll(e.tmpDir))
	}
	if !o.noWebhookClientCerts {
		if e.WebhookClient, err = configureWebhookClientCerts(te, e.tmpDir); err != nil {
			return nil, errors.Join(err, os.RemoveAll(e.tmpDir))
		}
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start control plane: %w", err), os.RemoveAll(e.tmpDir))
	}
	e.Config = cfg
	for _, ns := range []string{InstallNamespace, KubeVirtNamespace} {
		if err := createNamespace(ctx, cfg, ns); err != nil {
			return nil, errors.Join(err, te.Stop(), os.RemoveAll(e.tmpDir))
		}
	}
	// KubeVirt's admission spends seconds of CPU initialising; it starts
	// while the webhook manager's informers sync.
	kubevirtErr := make(chan error, 1)
	go func() { kubevirtErr <- e.startKubeVirtAdmission(ctx, o.defaultArch) }()
	err = e.startManager(ctx, o)
	if err = errors.Join(err, <-kubevirtErr); err != nil {
		return nil, errors.Join(err, e.StopWebhooks(), e.KubeVirt.Stop(), te.Stop(), os.RemoveAll(e.tmpDir))
	}
	return e, nil
}

func (e *Env) startManager(ctx context.Context, o startOptions) error {
	wio := &e.env.WebhookInstallOptions
	serverOpts := webhooks.ServerOptions{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir}
	if e.WebhookClient != nil {
		if err := e.WebhookClient.serverOptions(&serverOpts); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 webhooks.NewScheme(),
		Cache:                  webhooks.CacheOptions(InstallNamespace),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhooks.NewServer(serverOpts),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := webhooks.Setup(mctx, mgr, webhooks.Options{Namespace: InstallNamespace, ClaimGrace: ClaimGrace, AuditInterval: AuditInterval, NoAudit: o.noAudit}); err != nil {
		cancel()
		return fmt.Errorf("set up webhooks: %w", err)
	}
	go func() { e.done <- mgr.Start(mctx) }()
	e.cancel, e.Manager = cancel, mgr

	e.Client, err = client.New(e.Config, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, webhookReadyTimeout)
	defer wcancel()
	if !mgr.GetCache().WaitForCacheSync(wctx) {
		return errors.New("webhook informers did not sync")
	}
	return waitForTLS(wctx, net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)))
}

// AddAdmin returns a kubeconfig for a new cluster administrator.
func (e *Env) AddAdmin(name string) ([]byte, error) {
	u, err := e.env.AddUser(crenvtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// WebhookURL is the HTTPS address of path on the webhook server the API
// server calls, and caBundle the CA it trusts that server with: what a
// webhook configuration's clientConfig needs to reach a handler registered
// on e.Manager's webhook server.
func (e *Env) WebhookURL(path string) (url string, caBundle []byte) {
	wio := &e.env.WebhookInstallOptions
	return "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort)) + path, wio.LocalServingCAData
}

// WebhookHTTPClient is an HTTPS client of the webhook server, as the API
// server calls it: it trusts the server's CA and presents the API server's
// client certificate (Env.WebhookClient), which the server requires, so
// that tests can send it AdmissionReviews of their own.
func (e *Env) WebhookHTTPClient(timeout time.Duration) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.env.WebhookInstallOptions.LocalServingCAData)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if e.WebhookClient != nil {
		cfg.Certificates = []tls.Certificate{e.WebhookClient.Certificate}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// StopWebhooks stops the webhook manager, as in an outage of Virtstation:
// the API server keeps calling the webhooks and cannot reach them.
func (e *Env) StopWebhooks() error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	e.cancel = nil
	return <-e.done
}

// Stop stops the webhook manager and the control plane.
func (e *Env) Stop() error {
	return errors.Join(e.StopWebhooks(), e.KubeVirt.Stop(), e.env.Stop(), os.RemoveAll(e.tmpDir))
}

// waitForTLS dials addr until a TLS handshake succeeds.
func waitForTLS(ctx context.Context, addr string) error {
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // probing our own test server
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server at %s not serving: %w", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RepoRoot finds the repository root: the nearest directory above the
// working directory with this module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/virtstation/virtstation\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the virtstation repository (no go.mod of github.com/virtstation/virtstation above the working directory)")
		}
		dir = parent
	}
}

// binaryAssets is KUBEBUILDER_ASSETS, or the directory hack/envtest-bins.sh
// builds (once per machine) and prints.
func binaryAssets(root string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "envtest-bins.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build control-plane binaries with hack/envtest-bins.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// createNamespace creates the install namespace before the manager starts.
func createNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	c, err := client.New(cfg, client.Options{Scheme: webhooks.NewScheme()})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
