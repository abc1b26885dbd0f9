package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/virtstation/virtstation/internal/testenv"
)

// The names config/rbac gives the webhook.
const (
	webhookNamespace      = "virtstation-system"
	webhookServiceAccount = "virtstation-webhook"
	metricsReaderRole     = "virtstation-webhook-metrics-reader"
)

// TestMetricsEndpoint serves /metrics with the options main uses, as the
// webhook's ServiceAccount with the shipped RBAC, on a real API server,
// and scrapes it without a token, with a forged one, as a user without the
// metrics-reader role, and as a Prometheus bound to it.
func TestMetricsEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"webhook_role.yaml", "webhook_metrics_reader_role.yaml"} {
		applyFile(ctx, t, cp.Config, filepath.Join(root, "config", "rbac", f))
	}
	webhookToken := token(ctx, t, kube, webhookNamespace, webhookServiceAccount)
	promToken := token(ctx, t, kube, "monitoring", "prometheus")
	eveToken := token(ctx, t, kube, "team-a", "eve")
	// The binding an operator makes for their Prometheus (the chart's
	// webhook.metrics.readerSubjects).
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReaderRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	asWebhook := &rest.Config{Host: cp.Config.Host, BearerToken: webhookToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.Config.CAData}}
	httpClient, err := rest.HTTPClientFor(asWebhook)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := metricsserver.NewServer(metricsOptions("127.0.0.1:0", true), asWebhook, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	msDone := make(chan error, 1)
	mctx, stopMetrics := context.WithCancel(ctx)
	go func() { msDone <- ms.Start(mctx) }()
	defer func() {
		stopMetrics()
		if err := <-msDone; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	}()
	metricsURL := "https://" + bindAddr(t, ms) + "/metrics"

	// The server's certificate is self-signed.
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed test certificate
	}}
	cases := map[string]struct {
		token    string
		want     int
		wantBody string
	}{
		"no token": {want: http.StatusUnauthorized},
		// controller-runtime's filter answers 500 "Authentication failed"
		// when the TokenReview comes back with an error, as it does for a
		// token the API server does not know: refused all the same.
		"a forged token":            {token: "not-a-token", want: http.StatusInternalServerError, wantBody: "Authentication failed"},
		"a user without the role":   {token: eveToken, want: http.StatusForbidden},
		"the webhook's own account": {token: webhookToken, want: http.StatusForbidden},
		"Prometheus bound to it":    {token: promToken, want: http.StatusOK, wantBody: "go_goroutines"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /metrics: %s, want %d: %.300s", resp.Status, tc.want, body)
			}
			if !bytes.Contains(body, []byte(tc.wantBody)) {
				t.Errorf("GET /metrics lacks %q: %.500s", tc.wantBody, body)
			}
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		resp, err := c.Get("http://" + bindAddr(t, ms) + "/metrics")
		if err == nil {
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("GET over plain HTTP: %s, want no metrics", resp.Status)
			}
		}
	})
}

// bindAddr waits for the metrics server to listen and returns where.
func bindAddr(t *testing.T, ms any) string {
	t.Helper()
	b, ok := ms.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("%T does not say where it listens", ms)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if a := b.GetBindAddr(); a != "" {
			return a
		}
	}
	t.Fatal("the metrics server did not start listening")
	return ""
}

// token creates ServiceAccount ns/name and returns a token for it, as
// `kubectl create token` does.
func token(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, name string) string {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// applyFile creates every object of a multi-document manifest.
func applyFile(ctx context.Context, t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetNamespace() != "" {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}}
			if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("%s: create %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}
