package certs_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/certs"
	"github.com/virtstation/virtstation/internal/testenv"
)

// The shipped install: namespace, Service and configurations as in
// config/webhook.
const (
	installNS      = "virtstation-system"
	mutatingName   = "virtstation-mutating"
	validatingName = "virtstation-validating"
	// serverName is what the API server verifies for clientConfig.service.
	serverName = certs.DefaultServiceName + "." + installNS + ".svc"
	// policyPath is the shipped policy ConfigMap webhook: it admits
	// ConfigMaps labelled virtstation.io/policy, which the test creates.
	policyPath  = "/validate-v1-configmap-policy"
	policyLabel = "virtstation.io/policy"
)

// The rotation test's clock: a CA lives 18 s and starts rotating at 12 s,
// a serving certificate lives 6 s and is renewed every 4 s, each overlap
// lasts 2 s. The whole CA rotation is over about 16 s after the start.
var fastClock = certs.Options{CAValidity: 18 * time.Second, ServingValidity: 6 * time.Second, Overlap: 2 * time.Second}

// rotationTimeout bounds the wait for the CA rotation to finish: 16 s of
// clock and scheduling slack.
const rotationTimeout = 30 * time.Second

// leaderRules are what the chart must grant the webhook's ServiceAccount
// in the install namespace for --cert-mode=self, and no more.
func leaderRules(secret string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Read and watch the one Secret (watch by name, which RBAC allows
		// with resourceNames), and rotate it.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "list", "watch", "update"}},
		// Create it on first start: create cannot be restricted by name.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		// One Event per rotation step, on the Secret.
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// leaderClusterRules: read, watch and patch the caBundle of the two
// configurations, by name.
func leaderClusterRules(configs ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{"admissionregistration.k8s.io"},
		Resources:     []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		ResourceNames: configs,
		Verbs:         []string{"get", "list", "watch", "patch"},
	}}
}

// followerRules let a replica only read the Secret: a follower must never
// write, and the test would see it try.
func followerRules(secret string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "list", "watch"}}}
}

// countWrites counts requests that are not reads.
type countWrites struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c countWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(req)
}

// TestRotationWithoutFailedAdmission runs two replicas (a leader and a
// follower with read-only access to the Secret) against the shipped webhook
// configurations, with a real API server calling the leader's real webhook
// server for every policy ConfigMap created. Throughout a serving renewal
// and a full CA rotation it creates ConfigMaps and makes TLS handshakes to
// both replicas trusting exactly each configuration's current caBundle:
// not one may fail. It also checks the order of the rotation's phases as
// the handshakes saw them.
func TestRotationWithoutFailedAdmission(t *testing.T) {
	t.Parallel()
	controlPlane(t)
	ctx := t.Context()
	ensureNamespace(t, installNS)
	// The API server dials clientConfig.service by resolving it: an
	// ExternalName Service "localhost" sends it to this process, while the
	// name it verifies stays the production one, serverName.
	_, err := admin.CoreV1().Services(installNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: certs.DefaultServiceName},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	leaderCfg := userWithRules(t, "certs-leader", installNS, leaderRules(certs.DefaultSecretName), leaderClusterRules(mutatingName, validatingName), nil)
	var followerWrites atomic.Int64
	followerCfg := userWithRules(t, "certs-follower", installNS, followerRules(certs.DefaultSecretName), nil,
		func(rt http.RoundTripper) http.RoundTripper { return countWrites{next: rt, writes: &followerWrites} })
	waitRBAC(t, leaderCfg, installNS, certs.DefaultSecretName)
	waitRBAC(t, followerCfg, installNS, certs.DefaultSecretName)

	var reviewed atomic.Int64
	handlers := map[string]admission.Handler{policyPath: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		reviewed.Add(1)
		return admission.Allowed("")
	})}
	opts := fastClock
	opts.Namespace = installNS
	opts.MutatingWebhookConfigurations = []string{mutatingName}
	opts.ValidatingWebhookConfigurations = []string{validatingName}
	leader := startReplica(t, leaderCfg, opts, handlers, nil)
	followerOpts := opts
	followerOpts.Elected = make(chan struct{}) // never elected
	follower := startReplica(t, followerCfg, followerOpts, handlers, nil)
	createShippedConfigs(t, leader.port)
	start := time.Now()

	// First start: a Secret with a chain valid for every Service name,
	// the CA in every caBundle, the serving pair in both cert dirs.
	var caA string
	var servingA []byte
	eventually(t, settleTimeout, "Secret created and caBundles synced", func() error {
		sec, err := admin.CoreV1().Secrets(installNS).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := bundlesAre(ctx, sec.Data[certs.SecretKeyCACert]); err != nil {
			return err
		}
		caA, servingA = cn(t, sec.Data[certs.SecretKeyCACert]), sec.Data[certs.SecretKeyServingCert]
		if sec.Type != corev1.SecretTypeTLS {
			return fmt.Errorf("Secret type %s", sec.Type)
		}
		return verifyChain(sec.Data[certs.SecretKeyServingCert], sec.Data[certs.SecretKeyCACert],
			certs.DNSNames(certs.DefaultServiceName, installNS, certs.DefaultClusterDomain))
	})
	for _, r := range []*replica{leader, follower} {
		eventually(t, settleTimeout, "replica ready", readyCheck(r.rotator))
		eventually(t, settleTimeout, "cert dir holds the Secret's pair", filesHold(r.certDir, servingA))
	}
	// The API server learns of the caBundle through its informer.
	eventually(t, settleTimeout, "first admission through the webhook", func() error {
		if err := createPolicyConfigMap(ctx); err != nil {
			return err
		}
		if reviewed.Load() == 0 {
			return fmt.Errorf("the webhook was not called")
		}
		return nil
	})

	// Probe continuously until the rotation is over.
	probeCtx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	var samples []sample
	var handshakes, admissions atomic.Int64
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf("%5.2fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	wg.Go(func() {
		for probeCtx.Err() == nil {
			for _, ref := range []string{mutatingName, validatingName} {
				bundle, err := currentBundle(probeCtx, ref)
				if err != nil {
					if probeCtx.Err() == nil {
						fail("read caBundle of %s: %v", ref, err)
					}
					continue
				}
				for _, r := range []*replica{leader, follower} {
					leaf, err := handshake(r.addr, serverName, bundle)
					handshakes.Add(1)
					if err != nil {
						fail("handshake with %s trusting the caBundle of %s: %v", r.addr, ref, err)
						continue
					}
					if ref == validatingName && r == leader {
						mu.Lock()
						samples = append(samples, sample{bundle: cns(t, bundle), issuer: leaf.Issuer.CommonName})
						mu.Unlock()
					}
				}
			}
			time.Sleep(poll)
		}
	})
	wg.Go(func() {
		for probeCtx.Err() == nil {
			err := createPolicyConfigMap(probeCtx)
			if probeCtx.Err() != nil {
				return
			}
			admissions.Add(1)
			if err != nil {
				fail("admission: %v", err)
			}
			time.Sleep(poll)
		}
	})
	t.Cleanup(func() { stopProbes(); wg.Wait() })

	// A serving renewal from the same CA reaches both cert dirs.
	var servingA2 []byte
	eventually(t, settleTimeout, "serving certificate renewed", func() error {
		sec, err := admin.CoreV1().Secrets(installNS).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if bytes.Equal(sec.Data[certs.SecretKeyServingCert], servingA) || cn(t, sec.Data[certs.SecretKeyCACert]) != caA {
			return fmt.Errorf("not renewed yet")
		}
		servingA2 = sec.Data[certs.SecretKeyServingCert]
		return nil
	})
	t.Logf("%5.2fs serving certificate renewed", time.Since(start).Seconds())
	for _, r := range []*replica{leader, follower} {
		eventually(t, settleTimeout, "renewed pair in the cert dir", filesHold(r.certDir, servingA2))
	}

	// The CA rotation runs to its end: a new active CA, no next, no
	// previous, and the bundles back to one CA.
	var caB string
	var servingB []byte
	eventually(t, rotationTimeout, "CA rotation completed", func() error {
		sec, err := admin.CoreV1().Secrets(installNS).Get(ctx, certs.DefaultSecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cn(t, sec.Data[certs.SecretKeyCACert]) == caA || len(sec.Data[certs.SecretKeyPreviousCACert]) > 0 || len(sec.Data[certs.SecretKeyNextCACert]) > 0 {
			return fmt.Errorf("rotation in progress")
		}
		caB, servingB = cn(t, sec.Data[certs.SecretKeyCACert]), sec.Data[certs.SecretKeyServingCert]
		return bundlesAre(ctx, sec.Data[certs.SecretKeyCACert])
	})
	t.Logf("%5.2fs CA rotation completed: %s -> %s", time.Since(start).Seconds(), caA, caB)
	for _, r := range []*replica{leader, follower} {
		eventually(t, settleTimeout, "new CA's pair in the cert dir", filesHold(r.certDir, servingB))
	}
	time.Sleep(15 * poll) // a few more probes with the old CA gone
	stopProbes()
	wg.Wait()

	t.Logf("%d handshakes, %d admissions (%d reviews by the webhook), %d failures", handshakes.Load(), admissions.Load(), reviewed.Load(), len(failures))
	for _, f := range failures {
		t.Error(f)
	}
	if admissions.Load() < 20 || handshakes.Load() < 100 {
		t.Errorf("too few probes to mean anything: %d admissions, %d handshakes", admissions.Load(), handshakes.Load())
	}
	checkPhases(t, samples, caA, caB)
	if n := followerWrites.Load(); n != 0 {
		t.Errorf("the follower sent %d write requests; only the leader may write", n)
	}
	eventually(t, settleTimeout, "an Event for every step", func() error {
		return eventsRecorded(ctx, installNS, certs.DefaultSecretName,
			certs.ReasonCertificatesCreated, certs.ReasonCABundleUpdated, certs.ReasonServingIssued,
			certs.ReasonCARotationStarted, certs.ReasonCARotationPublished, certs.ReasonCARotationSwitched, certs.ReasonCARotationCompleted)
	})
}

// sample is what one handshake saw: the CAs in the caBundle (common
// names) and the issuer of the certificate served.
type sample struct {
	bundle []string
	issuer string
}

// checkPhases checks that the samples go through the rotation's phases in
// order, and all of them: only A trusted and serving; A and B trusted, A
// serving; A and B trusted, B serving; only B.
func checkPhases(t *testing.T, samples []sample, a, b string) {
	t.Helper()
	phase := func(s sample) int {
		switch {
		case slices.Equal(s.bundle, []string{a}) && s.issuer == a:
			return 1
		case slices.Equal(s.bundle, []string{a, b}) && s.issuer == a:
			return 2
		case slices.Equal(s.bundle, []string{a, b}) && s.issuer == b:
			return 3
		case slices.Equal(s.bundle, []string{b}) && s.issuer == b:
			return 4
		}
		return 0
	}
	seen := map[int]int{}
	last := 1
	for i, s := range samples {
		p := phase(s)
		if p == 0 || p < last {
			t.Fatalf("sample %d (bundle %v, served by %s) is out of order after phase %d", i, s.bundle, s.issuer, last)
		}
		last = p
		seen[p]++
	}
	for p := 1; p <= 4; p++ {
		if seen[p] == 0 {
			t.Errorf("phase %d never observed (samples per phase: %v)", p, seen)
		}
	}
	t.Logf("samples per phase: %v", seen)
}

// createShippedConfigs creates the webhook configurations of
// config/webhook/manifests.yaml, with every Service port set to port, and
// deletes them at the end of the test.
func createShippedConfigs(t *testing.T, port int) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := int32(port)
	ctx := t.Context()
	created := 0
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				c.Webhooks[i].ClientConfig.Service.Port = &p
			}
			if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &c, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
			})
			created++
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				c.Webhooks[i].ClientConfig.Service.Port = &p
			}
			if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &c, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
			})
			created++
		}
	}
	if created != 2 {
		t.Fatalf("manifests.yaml holds %d webhook configurations, want 2", created)
	}
}

// createPolicyConfigMap creates a ConfigMap the shipped policy webhook
// reviews; with failurePolicy Fail, it fails if the API server cannot
// reach the webhook over TLS.
func createPolicyConfigMap(ctx context.Context) error {
	_, err := admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-", Labels: map[string]string{policyLabel: "true"}},
	}, metav1.CreateOptions{})
	return err
}

// currentBundle is the caBundle of the first webhook of configuration name
// (mutating or validating, by name).
func currentBundle(ctx context.Context, name string) ([]byte, error) {
	if name == mutatingName {
		c, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return c.Webhooks[0].ClientConfig.CABundle, nil
	}
	c, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return c.Webhooks[0].ClientConfig.CABundle, nil
}

// bundlesAre checks that every webhook of both shipped configurations
// carries exactly want.
func bundlesAre(ctx context.Context, want []byte) error {
	return configBundlesAre(ctx, mutatingName, validatingName, want)
}

// configBundlesAre checks every webhook of the named configurations.
func configBundlesAre(ctx context.Context, mutating, validating string, want []byte) error {
	m, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
	if err != nil {
		return err
	}
	v, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var got []admissionregistrationv1.WebhookClientConfig
	for _, w := range m.Webhooks {
		got = append(got, w.ClientConfig)
	}
	for _, w := range v.Webhooks {
		got = append(got, w.ClientConfig)
	}
	for i, c := range got {
		if !bytes.Equal(c.CABundle, want) {
			return fmt.Errorf("webhook %d has caBundle %q, want the Secret's", i, c.CABundle)
		}
	}
	return nil
}

// verifyChain checks that the serving certificate chains to ca for every
// name, as a TLS client would.
func verifyChain(servingPEM, caPEM []byte, names []string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no CA certificate")
	}
	leaf, err := parsePEM(servingPEM)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := leaf[0].Verify(x509.VerifyOptions{DNSName: n, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Errorf("serving certificate for %s: %w", n, err)
		}
	}
	return nil
}

// filesHold checks that dir's tls.crt is want and its tls.key matches it.
func filesHold(dir string, want []byte) func() error {
	return func() error {
		got, err := os.ReadFile(filepath.Join(dir, certs.SecretKeyServingCert))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s holds another certificate", dir)
		}
		return nil
	}
}

// eventsRecorded checks that Events with every reason exist on the Secret.
func eventsRecorded(ctx context.Context, ns, secret string, reasons ...string) error {
	list, err := admin.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Secret" && e.Regarding.Name == secret {
			have[e.Reason] = true
		}
	}
	for _, r := range reasons {
		if !have[r] {
			return fmt.Errorf("no %s Event on Secret %s/%s (have %v)", r, ns, secret, have)
		}
	}
	return nil
}

func parsePEM(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no certificate in PEM data")
	}
	return out, nil
}

// cn is the common name of the first certificate in data.
func cn(t *testing.T, data []byte) string {
	t.Helper()
	c, err := parsePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return c[0].Subject.CommonName
}

// cns are the common names of the certificates of a bundle, in order.
func cns(t *testing.T, data []byte) []string {
	t.Helper()
	certs, err := parsePEM(data)
	if err != nil {
		t.Error(err)
		return nil
	}
	out := make([]string, len(certs))
	for i, c := range certs {
		out[i] = c.Subject.CommonName
	}
	return out
}
