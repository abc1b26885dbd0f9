package certs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/virtstation/virtstation/certs"
)

// Names of the drift test's own install, so it runs beside the rotation
// test on the same API server.
const (
	driftNS         = "drift-system"
	driftSecret     = "drift-certs"
	driftService    = "drift-webhook"
	driftMutating   = "drift-mutating"
	driftValidating = "drift-validating"
)

// TestRepairsDriftAndBrokenSecret starts from a Secret with junk in it and
// then breaks things the way people and tools do: a cleared caBundle, a new
// webhook without one, a serving certificate that is not one, a deleted
// Secret. The leader repairs each, and the cert dir follows.
func TestRepairsDriftAndBrokenSecret(t *testing.T) {
	t.Parallel()
	controlPlane(t)
	ctx := t.Context()
	ensureNamespace(t, driftNS)
	createDriftConfigs(t)
	secrets := admin.CoreV1().Secrets(driftNS)
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: driftSecret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			certs.SecretKeyServingCert: []byte("junk"), certs.SecretKeyServingKey: []byte("junk"),
			certs.SecretKeyCACert: []byte("junk"), "kept": []byte("not ours"),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	opts := certs.Options{
		Namespace: driftNS, SecretName: driftSecret, ServiceName: driftService,
		MutatingWebhookConfigurations:   []string{driftMutating},
		ValidatingWebhookConfigurations: []string{driftValidating},
	}
	rep := startReplica(t, rest.CopyConfig(cp.Config), opts, nil, func(r *replica) {
		// Bootstrap found no usable pair: a placeholder lets the webhook
		// server start, and the replica says it is not ready.
		c, err := os.ReadFile(filepath.Join(r.certDir, certs.SecretKeyServingCert))
		if err != nil {
			t.Fatalf("no placeholder after Bootstrap: %v", err)
		}
		if issuer := certIssuer(t, c); issuer == "" {
			t.Fatal("placeholder has no issuer")
		}
		if r.rotator.ReadyCheck(nil) == nil {
			t.Error("ready while serving a placeholder")
		}
	})

	secret := func() *corev1.Secret {
		t.Helper()
		s, err := secrets.Get(ctx, driftSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	names := certs.DNSNames(driftService, driftNS, certs.DefaultClusterDomain)
	healthy := func() error {
		s, err := secrets.Get(ctx, driftSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := verifyChain(s.Data[certs.SecretKeyServingCert], s.Data[certs.SecretKeyCACert], names); err != nil {
			return err
		}
		if err := configBundlesAre(ctx, driftMutating, driftValidating, s.Data[certs.SecretKeyCACert]); err != nil {
			return err
		}
		if err := filesHold(rep.certDir, s.Data[certs.SecretKeyServingCert])(); err != nil {
			return err
		}
		return rep.rotator.ReadyCheck(nil)
	}

	// The junk Secret is regenerated in place; a key that is not ours stays.
	eventually(t, settleTimeout, "junk Secret regenerated", healthy)
	if string(secret().Data["kept"]) != "not ours" {
		t.Error("regeneration dropped a key it does not own")
	}
	eventually(t, settleTimeout, "Warning Event for the regeneration", func() error {
		return eventsRecorded(ctx, driftNS, driftSecret, certs.ReasonCertificatesRegenerated)
	})
	ca := secret().Data[certs.SecretKeyCACert]

	// Someone clears a caBundle.
	m, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, driftMutating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settleTimeout, "cleared caBundle repaired", healthy)

	// An upgrade adds a webhook without a caBundle.
	v, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, driftValidating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	added := v.Webhooks[0]
	added.Name = "added.drift.virtstation.io"
	added.ClientConfig.CABundle = nil
	v.Webhooks = append(v.Webhooks, added)
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settleTimeout, "new webhook gets the caBundle", healthy)

	// The serving pair is replaced by a pair that is no serving
	// certificate (the CA's own): reissued, and the files follow.
	s := secret()
	s.Data[certs.SecretKeyServingCert], s.Data[certs.SecretKeyServingKey] = s.Data[certs.SecretKeyCACert], s.Data[certs.SecretKeyCAKey]
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settleTimeout, "bad serving certificate reissued", func() error {
		if bytes.Equal(secret().Data[certs.SecretKeyServingCert], ca) {
			return fmt.Errorf("still the CA certificate")
		}
		return healthy()
	})
	if !bytes.Equal(secret().Data[certs.SecretKeyCACert], ca) {
		t.Error("reissuing the serving certificate changed the CA")
	}

	// The Secret is deleted: a new CA, new bundles, new files.
	if err := secrets.Delete(ctx, driftSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settleTimeout, "deleted Secret recreated", func() error {
		s, err := secrets.Get(ctx, driftSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if bytes.Equal(s.Data[certs.SecretKeyCACert], ca) {
			return fmt.Errorf("still the old CA")
		}
		return healthy()
	})
}

// createDriftConfigs creates one mutating and one validating configuration
// with a webhook each, on a resource nothing creates.
func createDriftConfigs(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(name string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations) {
		path := "/" + name
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: driftNS, Name: driftService, Path: &path}},
			[]admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"drift.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
			}}
	}
	cc, rules := hook("mutate")
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: driftMutating},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.drift.virtstation.io", ClientConfig: cc, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cc, rules = hook("validate")
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: driftValidating},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.drift.virtstation.io", ClientConfig: cc, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // t.Context() is over by now
		_ = admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), driftMutating, metav1.DeleteOptions{})
		_ = admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), driftValidating, metav1.DeleteOptions{})
	})
}

// certIssuer is the issuer common name of the first certificate in data.
func certIssuer(t *testing.T, data []byte) string {
	t.Helper()
	c, err := parsePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return c[0].Issuer.CommonName
}
