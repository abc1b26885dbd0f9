package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a bare kube-apiserver and etcd: no CRDs, no webhooks. Tests
// of packages that only need core and coordination APIs (Leases,
// TokenReview, SubjectAccessReview, ConfigMaps) start one of these; it comes
// up in a few seconds.
type ControlPlane struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// FrontProxy is the aggregation layer's PKI when the control plane was
	// started WithAggregation, nil otherwise.
	FrontProxy *FrontProxy

	env    *crenvtest.Environment
	tmpDir string
	// addUser serializes AddUser: envtest's certificate authority is not
	// safe for concurrent use.
	addUser sync.Mutex
}

// Option configures StartControlPlane.
type Option func(*controlPlaneOptions)

type controlPlaneOptions struct {
	aggregation bool
	crds        bool
}

// WithCRDs installs the CRDs the full Env installs (internal/testenv/crds:
// KubeVirt's, CDI's, …), without their webhooks: stored VirtualMachines and
// VirtualMachineInstances for tests that need no admission.
func WithCRDs() Option {
	return func(o *controlPlaneOptions) { o.crds = true }
}

// WithAggregation turns on the API server's front proxy, so that aggregated
// APIs (RegisterSubresourceAPI) can be served through it.
func WithAggregation() Option {
	return func(o *controlPlaneOptions) { o.aggregation = true }
}

// StartControlPlane starts a bare control plane. Call Stop when done.
func StartControlPlane(opts ...Option) (*ControlPlane, error) {
	var o controlPlaneOptions
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
	te := &crenvtest.Environment{BinaryAssetsDirectory: assets}
	if o.crds {
		te.CRDDirectoryPaths = []string{filepath.Join(root, "internal", "testenv", "crds")}
		te.ErrorIfCRDPathMissing = true
	}
	cp := &ControlPlane{env: te}
	if o.aggregation {
		if cp.tmpDir, err = os.MkdirTemp("", "virtstation-front-proxy-"); err != nil {
			return nil, err
		}
		if cp.FrontProxy, err = ConfigureAggregation(te, cp.tmpDir); err != nil {
			return nil, errors.Join(err, os.RemoveAll(cp.tmpDir))
		}
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start control plane: %w", err), cp.removeTmp())
	}
	cp.Config = cfg
	return cp, nil
}

// AddUser returns a rest.Config for a new user in the given groups,
// authenticated by a client certificate.
func (cp *ControlPlane) AddUser(name string, groups ...string) (*rest.Config, error) {
	cp.addUser.Lock()
	defer cp.addUser.Unlock()
	u, err := cp.env.AddUser(crenvtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// AddAdmin returns a kubeconfig for a new cluster administrator, for a
// process that reaches the control plane on its own (a kubeconfig file).
func (cp *ControlPlane) AddAdmin(name string) ([]byte, error) {
	cp.addUser.Lock()
	defer cp.addUser.Unlock()
	u, err := cp.env.AddUser(crenvtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// Stop stops the control plane.
func (cp *ControlPlane) Stop() error { return errors.Join(cp.env.Stop(), cp.removeTmp()) }

func (cp *ControlPlane) removeTmp() error {
	if cp.tmpDir == "" {
		return nil
	}
	return os.RemoveAll(cp.tmpDir)
}

// Shared is one bare control plane for a package's tests, started on first
// use so that the package's unit tests and fuzzing (go test -fuzz) run
// without one. Main is the package's TestMain.
type Shared struct {
	// Options are StartControlPlane's, set before the first Get.
	Options []Option

	once sync.Once
	cp   *ControlPlane
	err  error
}

// Get starts the control plane on the first call and returns it; a failed
// start fails t.
func (s *Shared) Get(t testing.TB) *ControlPlane {
	t.Helper()
	s.once.Do(func() { s.cp, s.err = StartControlPlane(s.Options...) })
	if s.err != nil {
		t.Fatalf("control plane: %v", s.err)
	}
	return s.cp
}

// Stop stops the control plane if it was started.
func (s *Shared) Stop() error {
	if s.cp == nil {
		return nil
	}
	return s.cp.Stop()
}

// Main runs the package's tests, stops the control plane if one started,
// and exits: func TestMain(m *testing.M) { shared.Main(m) }.
func (s *Shared) Main(m *testing.M) {
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
