package idle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

const (
	// bridgeNS is where the bridge keeps its Leases; the shipped Role and
	// RoleBinding name it.
	bridgeNS = "virtstation-system"
	// bridgeSA is the bridge's ServiceAccount, as the shipped bindings name it.
	bridgeSA = "virtstation-bridge"
	// scraperSA stands for Prometheus: it may read the bridge's /metrics.
	scraperSA = "prometheus"
	// userNS holds the VMs and the user who opens them.
	userNS = "idle"
	// userSA is the workstation user whose token opens every session.
	userSA = "viewer"
	// createWorkers create VMs and VMIs in parallel: a few thousand
	// objects one by one would take minutes.
	createWorkers = 8
)

// cluster is the bridge's world: a control plane with the aggregation
// layer, KubeVirt's CRDs, the stand-in virt-api behind it, the shipped
// RBAC, and VMs whose displays all lead to one silent source.
type cluster struct {
	cp      *testenv.ControlPlane
	kube    kubernetes.Interface
	admin   client.Client
	virtAPI *virthandler.Server
	silent  *silentSource
	dir     string
	// kubeconfig reaches the API server as the bridge's ServiceAccount,
	// its token in a file, as in a pod.
	kubeconfig string
	// userToken is the workstation user's bearer token.
	userToken string
	// scraperToken is a Prometheus's bearer token, bound to the shipped
	// ClusterRole that may get the bridge's /metrics.
	scraperToken string
}

// startCluster brings the cluster up; call stop when done.
func startCluster(ctx context.Context) (c *cluster, err error) {
	c = &cluster{}
	if c.dir, err = os.MkdirTemp("", "virtstation-idle-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop())
		}
	}()
	root, err := testenv.RepoRoot()
	if err != nil {
		return c, err
	}
	if c.cp, err = testenv.StartControlPlane(testenv.WithAggregation()); err != nil {
		return c, err
	}
	if _, err := crenvtest.InstallCRDs(c.cp.Config, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "internal", "testenv", "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return c, fmt.Errorf("install CRDs: %w", err)
	}
	admin := rest.CopyConfig(c.cp.Config)
	admin.QPS, admin.Burst = -1, 0 // set-up creates thousands of objects
	if c.kube, err = kubernetes.NewForConfig(admin); err != nil {
		return c, err
	}
	if c.admin, err = client.New(admin, client.Options{Scheme: bridge.NewScheme()}); err != nil {
		return c, err
	}
	if c.silent, err = listenSilent("unix", filepath.Join(c.dir, "silent.sock")); err != nil {
		return c, err
	}
	c.virtAPI, err = virthandler.Start(ctx, virthandler.Options{
		FrontProxyCA: c.cp.FrontProxy.CA,
		AllowedNames: []string{testenv.FrontProxyClientName},
		DNSNames:     []string{testenv.SubresourceServerName},
	})
	if err != nil {
		return c, err
	}
	if err := testenv.RegisterSubresourceAPI(ctx, c.cp.Config, c.virtAPI.Port(), c.virtAPI.CABundle()); err != nil {
		return c, err
	}
	for _, ns := range []string{bridgeNS, userNS} {
		if err := c.ensureNamespace(ctx, ns); err != nil {
			return c, err
		}
	}
	for _, f := range []string{"bridge_role.yaml", "bridge_metrics_reader_role.yaml", "workstation_user_role.yaml"} {
		if err := c.apply(ctx, filepath.Join(root, "config", "rbac", f)); err != nil {
			return c, err
		}
	}
	if err := c.writeBridgeKubeconfig(ctx); err != nil {
		return c, err
	}
	if c.userToken, err = c.token(ctx, userNS, userSA); err != nil {
		return c, err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "workstation-user-" + userSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "virtstation-workstation-user"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: userSA, Namespace: userNS}},
	}
	if _, err := c.kube.RbacV1().RoleBindings(userNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	if c.scraperToken, err = c.token(ctx, bridgeNS, scraperSA); err != nil {
		return c, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "virtstation-bridge-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "virtstation-bridge-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: scraperSA, Namespace: bridgeNS}},
	}
	if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return c, err
	}
	return c, nil
}

// writeBridgeKubeconfig writes a kubeconfig for the bridge's
// ServiceAccount with a tokenFile, which the bridge re-reads on every dial.
func (c *cluster) writeBridgeKubeconfig(ctx context.Context) error {
	tok, err := c.token(ctx, bridgeNS, bridgeSA)
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(c.dir, "bridge-token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.cp.Config.Host, CertificateAuthorityData: c.cp.Config.CAData}
	cfg.AuthInfos["bridge"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["bridge"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "bridge"}
	cfg.CurrentContext = "bridge"
	c.kubeconfig = filepath.Join(c.dir, "bridge.kubeconfig")
	return clientcmd.WriteToFile(*cfg, c.kubeconfig)
}

// createVMs makes running VMs (a VM and its Running VMI) named names, and
// routes each one's display to the silent source.
func (c *cluster) createVMs(ctx context.Context, names []string) error {
	work := make(chan string)
	errs := make(chan error, createWorkers)
	var wg sync.WaitGroup
	for range createWorkers {
		wg.Go(func() {
			for name := range work {
				if err := c.createVM(ctx, name); err != nil {
					errs <- fmt.Errorf("create VM %s: %w", name, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for _, name := range names {
		select {
		case work <- name:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

func (c *cluster) createVM(ctx context.Context, name string) error {
	always := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		}},
	}
	if err := c.admin.Create(ctx, vm); err != nil {
		return err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		// The VMI CRD used here has no status subresource: status is
		// written with the object, as virt-handler would report it.
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running},
	}
	if err := c.admin.Create(ctx, vmi); err != nil {
		return err
	}
	c.virtAPI.Register(userNS, name, virthandler.Target{VNC: c.silent.addr})
	return nil
}

// heldLeases counts the session Leases replica holds.
func (c *cluster) heldLeases(ctx context.Context, replica string) (int, error) {
	list, err := c.kube.CoordinationV1().Leases(bridgeNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, replica+"/") {
			n++
		}
	}
	return n, nil
}

// token creates ServiceAccount namespace/name (if missing) and returns a
// token for it, as `kubectl create token` does.
func (c *cluster) token(ctx context.Context, namespace, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := c.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

func (c *cluster) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// apply creates every object of a multi-document manifest.
func (c *cluster) apply(ctx context.Context, path string) error {
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
		if err := c.admin.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// stop stops the stand-in virt-api, the silent source and the control
// plane, and removes the files.
func (c *cluster) stop() error {
	var errs []error
	if c.virtAPI != nil {
		errs = append(errs, c.virtAPI.Close())
	}
	if c.silent != nil {
		errs = append(errs, c.silent.Close())
	}
	if c.cp != nil {
		errs = append(errs, c.cp.Stop())
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}
