package clientcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"go.uber.org/zap/zapcore"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// requestTimeout bounds one direct call to the webhook server.
const requestTimeout = 10 * time.Second

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	var err error
	env, err = testenv.Start(context.Background(), testenv.WithWebhookClientCerts())
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest stop:", err)
	}
	os.Exit(code)
}

// TestAdmissionThroughTheAPIServer: with client certificates required, a
// managed VM is still admitted and mutated. The mutating webhook fails
// closed for managed VMs, so a refused API server would fail the create.
func TestAdmissionThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clientcert-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vm := managedVM(ns.Name, "dev")
	if err := env.Client.Create(ctx, vm); err != nil {
		t.Fatalf("create a managed VM through the API server: %v", err)
	}
	if vm.Annotations[api.AnnotationInjected] == "" {
		t.Errorf("created VM has no %s annotation: the mutating webhook did not run", api.AnnotationInjected)
	}
	ifaces := vm.Spec.Template.Spec.Domain.Devices.Interfaces
	if len(ifaces) != 1 || ifaces[0].MacAddress == "" {
		t.Errorf("created VM's interfaces %+v, want one with a pinned MAC", ifaces)
	}
}

// TestDirectCallsRefused POSTs to every webhook path as a pod that can reach
// the webhook Service would: without a certificate, or with one of the
// right name from another CA, the TLS handshake fails and no request is
// read. With the API server's certificate the request reaches the handler
// (here the protocol check, which refuses an empty body with 400).
func TestDirectCallsRefused(t *testing.T) {
	_, otherCert, otherKey, err := testenv.NewClientPKI(testenv.WebhookClientName)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tls.X509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		cert       *tls.Certificate
		wantStatus int // 0: refused in the TLS handshake
	}{
		"no client certificate":            {},
		"certificate from another CA":      {cert: &forged},
		"the API server's own certificate": {cert: &env.WebhookClient.Certificate, wantStatus: http.StatusBadRequest},
	}
	for _, path := range []string{mutate.Path, validate.VMPath, validate.ConfigMapPath, claims.DeletionGuardPath} {
		for name, tc := range cases {
			t.Run(path+"/"+name, func(t *testing.T) {
				status, err := post(path, tc.cert)
				switch {
				case tc.wantStatus == 0 && err == nil:
					t.Fatalf("HTTP %d, want the TLS handshake refused", status)
				case tc.wantStatus == 0 && !isTLSRefusal(err):
					t.Fatalf("error %v, want a TLS alert from the server", err)
				case tc.wantStatus != 0 && err != nil:
					t.Fatalf("%v, want HTTP %d", err, tc.wantStatus)
				case tc.wantStatus != 0 && status != tc.wantStatus:
					t.Fatalf("HTTP %d, want %d", status, tc.wantStatus)
				}
			})
		}
	}
}

// post sends {} to path on the webhook server over a new connection,
// trusting the server's CA and presenting cert when not nil.
func post(path string, cert *tls.Certificate) (int, error) {
	url, caBundle := env.WebhookURL(path)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return 0, errors.New("no webhook serving CA")
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := c.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // only the status matters
	return resp.StatusCode, nil
}

// isTLSRefusal reports whether err is the server's TLS alert refusing the
// client's certificate (TLS 1.3 reports it on the first read).
func isTLSRefusal(err error) bool {
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "tls: certificate required") || strings.Contains(s, "tls: unknown certificate authority") || strings.Contains(s, "tls: bad certificate")
}

// managedVM is a stopped managed VM with a container disk.
func managedVM(ns, name string) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	guest := resource.MustParse("1Gi")
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{api.LabelManaged: api.LabelTrue}},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}, Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
				}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"},
				}}},
			}},
		},
	}
}
