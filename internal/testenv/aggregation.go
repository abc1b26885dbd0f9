package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVirt's subresource API as the aggregator sees it. The Service mirrors a
// KubeVirt install (virt-api in namespace kubevirt), so the TLS server name the
// aggregator verifies, SubresourceServerName, is the production one too.
const (
	SubresourceGroup            = "subresources.kubevirt.io"
	SubresourceVersion          = "v1"
	SubresourceServiceNamespace = "kubevirt"
	SubresourceServiceName      = "virt-api"
	// SubresourceServerName is the name the aggregator expects in the
	// aggregated server's certificate: <service>.<namespace>.svc.
	SubresourceServerName = SubresourceServiceName + "." + SubresourceServiceNamespace + ".svc"
	// FrontProxyClientName is the common name of the API server's proxy
	// client certificate (--requestheader-allowed-names).
	FrontProxyClientName = "front-proxy-client"
	// SubresourceDefaultRole is KubeVirt's ClusterRole (and binding) that
	// lets every authenticated user get subresources.kubevirt.io's version
	// (virtctl's version check) and guestfs.
	SubresourceDefaultRole = "kubevirt.io:default"
)

// The front-proxy identity headers, as kube-apiserver documents them.
const (
	RemoteUserHeader        = "X-Remote-User"
	RemoteGroupHeader       = "X-Remote-Group"
	RemoteExtraHeaderPrefix = "X-Remote-Extra-"
)

// aggregationTimeout bounds the wait for the aggregator to mark the APIService
// Available and route to it; its availability controller probes with
// back-off, usually within a second or two.
const aggregationTimeout = 60 * time.Second

// aggregationPoll is how often RegisterSubresourceAPI checks progress.
const aggregationPoll = 100 * time.Millisecond

// frontProxyValidity is long enough for any test run.
const frontProxyValidity = 24 * time.Hour

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// FrontProxy is the PKI of kube-apiserver's front proxy: the aggregation
// layer presents ClientCert to aggregated API servers, which trust CA and
// read the caller's identity from the X-Remote-* headers.
type FrontProxy struct {
	// CA is the PEM certificate that signs the proxy client certificate
	// (--requestheader-client-ca-file). Aggregated servers verify callers
	// against it.
	CA []byte

	caFile, certFile, keyFile string
}

// NewFrontProxy generates a front-proxy CA and a client certificate named
// FrontProxyClientName, and writes them into dir.
func NewFrontProxy(dir string) (*FrontProxy, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "virtstation-test-front-proxy-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(frontProxyValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: FrontProxyClientName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(frontProxyValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	fp := &FrontProxy{
		CA:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile:   filepath.Join(dir, "front-proxy-ca.crt"),
		certFile: filepath.Join(dir, "front-proxy-client.crt"),
		keyFile:  filepath.Join(dir, "front-proxy-client.key"),
	}
	files := map[string][]byte{
		fp.caFile:   fp.CA,
		fp.certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER}),
		fp.keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write front-proxy PKI: %w", err)
		}
	}
	return fp, nil
}

// Args are the kube-apiserver flags that turn the front proxy on.
func (fp *FrontProxy) Args() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       fp.caFile,
		"requestheader-allowed-names":        FrontProxyClientName,
		"requestheader-username-headers":     RemoteUserHeader,
		"requestheader-group-headers":        RemoteGroupHeader,
		"requestheader-extra-headers-prefix": RemoteExtraHeaderPrefix,
		"proxy-client-cert-file":             fp.certFile,
		"proxy-client-key-file":              fp.keyFile,
	}
}

// ClientCertificate is the proxy client certificate, for tests that play
// the API server towards an aggregated server.
func (fp *FrontProxy) ClientCertificate() (tls.Certificate, error) {
	return tls.LoadX509KeyPair(fp.certFile, fp.keyFile)
}

// ConfigureAggregation generates a front proxy in dir and sets its flags on
// te's API server. Call it before te.Start.
func ConfigureAggregation(te *crenvtest.Environment, dir string) (*FrontProxy, error) {
	fp, err := NewFrontProxy(dir)
	if err != nil {
		return nil, err
	}
	args := te.ControlPlane.GetAPIServer().Configure()
	for k, v := range fp.Args() {
		args.Set(k, v)
	}
	return fp, nil
}

// RegisterSubresourceAPI makes the API server at cfg route
// subresources.kubevirt.io/v1 to an aggregated server listening on
// localhost:port, as KubeVirt's APIService does to virt-api. The Service is
// of type ExternalName "localhost": the aggregator resolves such a Service to
// externalName:port, while Endpoints may not point at loopback addresses.
// caBundle verifies the server's certificate, which must be valid for
// SubresourceServerName; nil skips verification. It returns once the
// APIService is Available and the group answers discovery through the API
// server. It creates namespace kubevirt, Service virt-api and APIService
// v1.subresources.kubevirt.io with server-side apply; call it once per
// control plane: a second call updates the objects, but may return before
// the aggregator routes to the new port.
func RegisterSubresourceAPI(ctx context.Context, cfg *rest.Config, port int, caBundle []byte) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	objects := []struct {
		gvr schema.GroupVersionResource
		obj runtime.Object
	}{
		{corev1.SchemeGroupVersion.WithResource("namespaces"), &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: SubresourceServiceNamespace},
		}},
		{corev1.SchemeGroupVersion.WithResource("services"), &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: SubresourceServiceNamespace, Name: SubresourceServiceName},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
		}},
		{apiServiceGVR, apiService(port, caBundle)},
		{rbacv1.SchemeGroupVersion.WithResource("clusterroles"), defaultClusterRole()},
		{rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: SubresourceDefaultRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SubresourceDefaultRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
		}},
	}
	for _, o := range objects {
		if err := apply(ctx, dyn, o.gvr, o.obj); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, aggregationTimeout)
	defer cancel()
	return waitForSubresourceAPI(wctx, cfg, dyn)
}

// defaultClusterRole is KubeVirt v1.9.0's kubevirt.io:default
// (virt-operator's rbac.newDefaultClusterRole), which a KubeVirt install
// binds to system:authenticated.
func defaultClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: SubresourceDefaultRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{SubresourceGroup}, Resources: []string{"version", "guestfs"}, Verbs: []string{"get", "list"}},
		},
	}
}

// apiService is the APIService v1.subresources.kubevirt.io pointing at port.
func apiService(port int, caBundle []byte) *unstructured.Unstructured {
	service := map[string]any{
		"namespace": SubresourceServiceNamespace,
		"name":      SubresourceServiceName,
		"port":      int64(port),
	}
	spec := map[string]any{
		"group":                SubresourceGroup,
		"version":              SubresourceVersion,
		"service":              service,
		"groupPriorityMinimum": int64(1000),
		"versionPriority":      int64(15),
	}
	if caBundle == nil {
		spec["insecureSkipTLSVerify"] = true
	} else {
		// Unstructured holds []byte fields in their JSON form, base64.
		spec["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": SubresourceVersion + "." + SubresourceGroup},
		"spec":       spec,
	}}
}

// apply server-side applies obj, so repeated registrations converge.
func apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj runtime.Object) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "virtstation-test", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// waitForSubresourceAPI waits for Available=True, then for discovery of the
// group through the API server: the proxy learns of availability through
// its own informer, a moment after the condition is written.
func waitForSubresourceAPI(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface) error {
	name := SubresourceVersion + "." + SubresourceGroup
	var last string
	err := wait.PollUntilContextCancel(ctx, aggregationPoll, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		available, msg := availableCondition(u)
		last = msg
		return available, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available (last condition: %q): %w", name, last, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := SubresourceGroup + "/" + SubresourceVersion
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, aggregationPoll, true, func(context.Context) (bool, error) {
		_, lastErr = dc.ServerResourcesForGroupVersion(gv)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("discovery of %s through the API server: %w", gv, errors.Join(err, lastErr))
	}
	return nil
}

// availableCondition reads the Available condition of an APIService.
func availableCondition(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Available" {
			continue
		}
		return m["status"] == "True", fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
	}
	return false, "no Available condition yet"
}
