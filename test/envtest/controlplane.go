package envtest

import (
	"fmt"

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

	env *crenvtest.Environment
}

// StartControlPlane starts a bare control plane. Call Stop when done.
func StartControlPlane() (*ControlPlane, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := binaryAssets(root)
	if err != nil {
		return nil, err
	}
	te := &crenvtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return &ControlPlane{Config: cfg, env: te}, nil
}

// AddUser returns a rest.Config for a new user in the given groups,
// authenticated by a client certificate.
func (cp *ControlPlane) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := cp.env.AddUser(crenvtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// Stop stops the control plane.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }
