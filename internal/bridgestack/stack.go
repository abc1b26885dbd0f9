package bridgestack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// Namespace is where the bridge runs: its ServiceAccount, Leases and
// host-key pins. The shipped Role and RoleBinding name it.
const Namespace = "virtstation-system"

// serviceAccount is the bridge's, as the shipped bindings name it.
const serviceAccount = "virtstation-bridge"

// Stack is a running QEMU, stand-in virt-api and the bridge's identity.
type Stack struct {
	// QEMU is the one machine whose console and display VMIs reach
	// through Attach; nil with WithoutQEMU.
	QEMU *qemu.VM
	// VirtAPI serves the VMI subresources behind the aggregation layer.
	VirtAPI *virthandler.Server
	// BridgeConfig reaches the API server as the bridge's ServiceAccount,
	// with its token in a file, as in a pod.
	BridgeConfig *rest.Config

	kube  kubernetes.Interface
	admin client.Client
	dir   string
}

// Option changes what Start brings up.
type Option func(*options)

type options struct {
	noQEMU  bool
	virtAPI virthandler.Options
}

// WithVirtAPI gives the stand-in virt-api opts' Client, OnStart and OnStop
// (start and stop on the stored VMs; the caller plays virt-controller).
func WithVirtAPI(opts virthandler.Options) Option {
	return func(o *options) { o.virtAPI = opts }
}

// WithoutQEMU starts no machine of the stack's own: the caller registers
// its machines' sockets with VirtAPI.Register (Attach cannot be used).
func WithoutQEMU() Option { return func(o *options) { o.noQEMU = true } }

// Start brings the stack up on the control plane adminCfg reaches, whose
// API server runs with the front proxy fp. root is the repository (for
// config/rbac). Call Stop when done.
func Start(ctx context.Context, adminCfg *rest.Config, fp *testenv.FrontProxy, root string, opts ...Option) (s *Stack, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s = &Stack{}
	if s.dir, err = os.MkdirTemp("", "virtstation-bridgestack-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	if s.kube, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return s, err
	}
	if s.admin, err = client.New(adminCfg, client.Options{}); err != nil {
		return s, err
	}
	if !o.noQEMU {
		if s.QEMU, err = qemu.Start(ctx, s.dir); err != nil {
			return s, err
		}
	}
	s.VirtAPI, err = virthandler.Start(ctx, virthandler.Options{
		FrontProxyCA: fp.CA,
		AllowedNames: []string{testenv.FrontProxyClientName},
		DNSNames:     []string{testenv.SubresourceServerName},
		Client:       o.virtAPI.Client,
		OnStart:      o.virtAPI.OnStart,
		OnStop:       o.virtAPI.OnStop,
	})
	if err != nil {
		return s, err
	}
	if err := testenv.RegisterSubresourceAPI(ctx, adminCfg, s.VirtAPI.Port(), s.VirtAPI.CABundle()); err != nil {
		return s, err
	}
	if err := s.ensureNamespace(ctx, Namespace); err != nil {
		return s, err
	}
	for _, f := range []string{"bridge_role.yaml", "workstation_user_role.yaml"} {
		if err := s.apply(ctx, filepath.Join(root, "config", "rbac", f)); err != nil {
			return s, err
		}
	}
	tok, err := s.Token(ctx, Namespace, serviceAccount)
	if err != nil {
		return s, err
	}
	tokenFile := filepath.Join(s.dir, "bridge-token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return s, err
	}
	s.BridgeConfig = &rest.Config{Host: adminCfg.Host, BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAData: adminCfg.CAData}}
	return s, nil
}

// Attach makes namespace/name's console, display and screenshots the QEMU
// machine's.
func (s *Stack) Attach(namespace, name string) {
	s.VirtAPI.Register(namespace, name, virthandler.Target{Console: s.QEMU.SerialSocket, VNC: s.QEMU.VNCSocket, QMP: s.QEMU.QMPSocket})
}

// Token creates ServiceAccount namespace/name (if missing) and returns a
// token for it, as `kubectl create token` does.
func (s *Stack) Token(ctx context.Context, namespace, name string) (string, error) {
	if err := s.ensureNamespace(ctx, namespace); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := s.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := s.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// BindWorkstationUser gives ServiceAccount namespace/name the shipped
// workstation-user role in its namespace.
func (s *Stack) BindWorkstationUser(ctx context.Context, namespace, name string) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "workstation-user-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "virtstation-workstation-user"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
	}
	_, err := s.kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// Stop stops QEMU and the stand-in virt-api and removes the token file.
func (s *Stack) Stop() error {
	var errs []error
	if s.VirtAPI != nil {
		errs = append(errs, s.VirtAPI.Close())
	}
	if s.QEMU != nil {
		errs = append(errs, s.QEMU.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

func (s *Stack) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// apply creates every object of a multi-document manifest.
func (s *Stack) apply(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := s.admin.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}
