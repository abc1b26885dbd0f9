package certs_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/certs"
	"github.com/virtstation/virtstation/webhooks"
)

// TestManagerWiring runs SetupCerts in a controller-runtime manager as
// cmd/webhook does, with leader election: the webhook server starts on the
// bootstrap pair, /readyz turns ready once the Secret's certificate is
// served, and the server then presents a certificate that the Secret's CA
// (also in the caBundle) verifies for the Service name.
func TestManagerWiring(t *testing.T) {
	t.Parallel()
	controlPlane(t)
	const (
		ns      = "wiring-system"
		secret  = "wiring-certs"
		service = "wiring-webhook"
		config  = "wiring-mutating"
	)
	ctx := t.Context()
	ensureNamespace(t, ns)
	createMutatingConfig(t, config)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	webhookPort, probePort := freePort(t), freePort(t)
	certDir := filepath.Join(t.TempDir(), "serving-certs")
	mgr, err := ctrl.NewManager(rest.CopyConfig(cp.Config), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  net.JoinHostPort("127.0.0.1", strconv.Itoa(probePort)),
		LeaderElection:          true,
		LeaderElectionID:        "virtstation-webhook",
		LeaderElectionNamespace: ns,
		WebhookServer:           webhooks.NewServer(webhooks.ServerOptions{Host: "127.0.0.1", Port: webhookPort, CertDir: certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhooks.SetupCerts(ctx, mgr, webhooks.CertOptions{
		Mode: webhooks.CertModeSelf, Namespace: ns, CertDir: certDir,
		SecretName: secret, ServiceName: service, MutatingConfig: config, ValidatingConfig: "wiring-absent",
	}); err != nil {
		t.Fatal(err)
	}
	// The manager runs its webhook server once asked for it, as Setup does
	// when it registers the handlers.
	mgr.GetWebhookServer().Register("/mutate", &webhook.Admission{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})})
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	eventually(t, settleTimeout, "manager ready", func() error {
		resp, err := http.Get(readyz) //nolint:gosec // test URL
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", resp.StatusCode, body)
		}
		return nil
	})
	sec, err := admin.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := sec.Data[certs.SecretKeyCACert]
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort))
	// certwatcher picks the Secret's pair up from its file watch, or at
	// worst from its 10 s poll if the write beat the watch.
	eventually(t, settleTimeout+certwatcherPoll, "webhook server serves the Secret's certificate", func() error {
		_, err := handshake(addr, service+"."+ns+".svc", ca)
		return err
	})
	eventually(t, settleTimeout, "caBundle synced", func() error {
		c, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, config, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(c.Webhooks[0].ClientConfig.CABundle) != string(ca) {
			return fmt.Errorf("caBundle is not the Secret's CA")
		}
		return nil
	})
}

// certwatcherPoll is controller-runtime's certwatcher poll interval.
const certwatcherPoll = 10 * time.Second

// createMutatingConfig creates a mutating configuration with one webhook
// on a resource nothing creates, deleted at the end of the test.
func createMutatingConfig(t *testing.T, name string) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	path := "/mutate"
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "mutate." + name + ".virtstation.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "wiring-system", Name: "wiring-webhook", Path: &path}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"wiring.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
			}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
