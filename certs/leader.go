package certs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Event reasons, one per rotation step. Events are recorded on the Secret.
const (
	ReasonCertificatesCreated     = "CertificatesCreated"
	ReasonCertificatesRegenerated = "CertificatesRegenerated"
	ReasonServingIssued           = "ServingCertificateIssued"
	ReasonCARotationStarted       = "CARotationStarted"
	ReasonNextCADiscarded         = "NextCADiscarded"
	ReasonCARotationPublished     = "CARotationPublished"
	ReasonCARotationSwitched      = "CARotationSwitched"
	ReasonCASwitchRecorded        = "CASwitchRecorded"
	ReasonCARotationCompleted     = "CARotationCompleted"
	ReasonCABundleUpdated         = "CABundleUpdated"
)

// managedByLabel marks the Secret as this component's.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "virtstation-webhook"
)

// reconcile brings the Secret and the bundles to what plan wants: it
// observes, plans, applies either the Secret changes or the bundle patches,
// and observes again, until the plan is empty. It returns plan's deadline.
func (r *Rotator) reconcile(ctx context.Context) (time.Time, error) {
	for range maxSteps {
		sec, err := r.client.CoreV1().Secrets(r.opts.Namespace).Get(ctx, r.opts.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sec, err = nil, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("read Secret: %w", err)
		}
		bundles, err := r.observeBundles(ctx)
		if err != nil {
			return time.Time{}, err
		}
		st := state{bundles: bundles}
		if sec != nil {
			st.secret = parseMaterial(sec.Data, sec.Annotations)
		}
		now := time.Now()
		acts, wake := plan(st, now, r.policy)
		if len(acts) == 0 {
			return wake, nil
		}
		if acts[0].mutatesSecret() {
			if err := r.writeSecret(ctx, sec, st.secret, acts, now); err != nil {
				return time.Time{}, err
			}
			continue
		}
		for _, a := range acts {
			if err := r.syncBundle(ctx, sec, a, st.secret.bundle()); err != nil {
				return time.Time{}, err
			}
		}
	}
	return time.Time{}, fmt.Errorf("certificates did not settle in %d steps", maxSteps)
}

// observeBundles reads the caBundle of every webhook of the configured
// webhook configurations; a configuration that does not exist is skipped.
func (r *Rotator) observeBundles(ctx context.Context) ([]webhookBundle, error) {
	var out []webhookBundle
	api := r.client.AdmissionregistrationV1()
	for _, name := range r.opts.MutatingWebhookConfigurations {
		c, err := api.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read MutatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range c.Webhooks {
			out = append(out, webhookBundle{config: configRef{mutatingKind, name}, webhook: w.Name, caBundle: w.ClientConfig.CABundle})
		}
	}
	for _, name := range r.opts.ValidatingWebhookConfigurations {
		c, err := api.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", name, err)
		}
		for _, w := range c.Webhooks {
			out = append(out, webhookBundle{config: configRef{validatingKind, name}, webhook: w.Name, caBundle: w.ClientConfig.CABundle})
		}
	}
	return out, nil
}

// writeSecret applies the Secret actions to m and creates or updates the
// Secret. An update carries the resourceVersion read, so a concurrent
// writer makes it fail and the next reconcile plans again.
func (r *Rotator) writeSecret(ctx context.Context, sec *corev1.Secret, m *material, acts []action, now time.Time) error {
	next, err := r.apply(m, acts, now)
	if err != nil {
		return err
	}
	api := r.client.CoreV1().Secrets(r.opts.Namespace)
	var written *corev1.Secret
	if sec == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: r.opts.SecretName, Namespace: r.opts.Namespace,
				Labels:      map[string]string{managedByLabel: managedByValue},
				Annotations: map[string]string{},
			},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{},
		}
		next.writeTo(s.Data, s.Annotations)
		written, err = api.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		s := sec.DeepCopy()
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		next.writeTo(s.Data, s.Annotations)
		written, err = api.Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return fmt.Errorf("write Secret: %w", err)
	}
	for _, a := range acts {
		r.record(written, nil, a, sec != nil, next)
	}
	return nil
}

// apply performs the Secret actions on a copy of m, in order. It generates
// keys, so it is not pure, but it reads nothing but its arguments.
func (r *Rotator) apply(m *material, acts []action, now time.Time) (*material, error) {
	n := &material{}
	if m != nil {
		c := *m
		n = &c
	}
	caName := r.opts.ServiceName + "-ca"
	issue := func() error {
		kp, err := issueServing(n.ca, now, r.opts.ServingValidity, r.policy.dnsNames)
		n.serving, n.servingErr = kp, err
		return err
	}
	for _, a := range acts {
		var err error
		switch a.kind {
		case actGenerate:
			n = &material{}
			if n.ca, err = newCA(now, r.opts.CAValidity, caName); err == nil {
				err = issue()
			}
		case actIssueServing:
			err = issue()
		case actStartCARotation:
			n.next, n.nextErr, n.nextPublishedAt = nil, nil, time.Time{}
			n.next, err = newCA(now, r.opts.CAValidity, caName)
		case actDiscardNextCA:
			n.next, n.nextErr, n.nextPublishedAt = nil, nil, time.Time{}
		case actRecordPublished:
			n.nextPublishedAt = now
		case actSwitchCA:
			n.previous, n.previousPEM, n.previousErr = nil, nil, nil
			if n.ca != nil && usable(n.ca.cert, now, true) == "" {
				n.previous, n.previousPEM = n.ca.cert, n.ca.certPEM
			}
			n.ca, n.caErr = n.next, nil
			n.next, n.nextErr, n.nextPublishedAt = nil, nil, time.Time{}
			n.switchedAt = now
			err = issue()
		case actRecordSwitched:
			n.switchedAt = now
		case actDropPreviousCA:
			n.previous, n.previousPEM, n.previousErr = nil, nil, nil
			n.switchedAt = time.Time{}
		default:
			err = fmt.Errorf("action %s does not change the Secret", a.kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.kind, err)
		}
	}
	return n, nil
}

// syncBundle patches the webhooks of one configuration whose caBundle is
// not want. The JSON patch tests the resourceVersion it was computed from,
// so it never overwrites a concurrent edit it has not seen.
func (r *Rotator) syncBundle(ctx context.Context, sec *corev1.Secret, a action, want []byte) error {
	cfg, err := r.bundleConfig(a.config)
	if err != nil {
		return err
	}
	rv, current, err := cfg.get(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", a.config, err)
	}
	p, err := bundlePatch(rv, current, want)
	if err != nil || p == nil {
		return err
	}
	patched, err := cfg.patch(ctx, p)
	if err != nil {
		return fmt.Errorf("patch caBundle of %s: %w", a.config, err)
	}
	r.record(sec, patched, a, true, nil)
	return nil
}

// bundleConfig reads and patches one webhook configuration's caBundles,
// whichever kind it is.
type bundleConfig struct {
	// get returns the resourceVersion and each webhook's caBundle.
	get   func(ctx context.Context) (string, [][]byte, error)
	patch func(ctx context.Context, p []byte) (runtime.Object, error)
}

func (r *Rotator) bundleConfig(ref configRef) (bundleConfig, error) {
	api := r.client.AdmissionregistrationV1()
	switch ref.kind {
	case mutatingKind:
		return newBundleConfig(api.MutatingWebhookConfigurations(), ref.name,
			func(obj *admissionregistrationv1.MutatingWebhookConfiguration) (string, [][]byte) {
				b := make([][]byte, len(obj.Webhooks))
				for i, w := range obj.Webhooks {
					b[i] = w.ClientConfig.CABundle
				}
				return obj.ResourceVersion, b
			}), nil
	case validatingKind:
		return newBundleConfig(api.ValidatingWebhookConfigurations(), ref.name,
			func(obj *admissionregistrationv1.ValidatingWebhookConfiguration) (string, [][]byte) {
				b := make([][]byte, len(obj.Webhooks))
				for i, w := range obj.Webhooks {
					b[i] = w.ClientConfig.CABundle
				}
				return obj.ResourceVersion, b
			}), nil
	}
	return bundleConfig{}, fmt.Errorf("unknown webhook configuration kind %q", ref.kind)
}

// webhookConfigClient is what a bundleConfig uses of the typed client of
// one webhook configuration kind.
type webhookConfigClient[T runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// newBundleConfig reads and patches the configuration name through c;
// bundles returns a configuration's resourceVersion and each webhook's
// caBundle.
func newBundleConfig[T runtime.Object](c webhookConfigClient[T], name string, bundles func(T) (string, [][]byte)) bundleConfig {
	return bundleConfig{
		get: func(ctx context.Context) (string, [][]byte, error) {
			obj, err := c.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", nil, err
			}
			rv, b := bundles(obj)
			return rv, b, nil
		},
		patch: func(ctx context.Context, p []byte) (runtime.Object, error) {
			return c.Patch(ctx, name, types.JSONPatchType, p, metav1.PatchOptions{FieldManager: fieldManager})
		},
	}
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// bundlePatch is the JSON patch that sets want as the caBundle of every
// webhook (by index) whose current bundle differs, guarded by a test of
// resourceVersion. It is nil when nothing differs.
func bundlePatch(resourceVersion string, current [][]byte, want []byte) ([]byte, error) {
	ops := []jsonPatchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: resourceVersion}}
	for i, b := range current {
		if !bytes.Equal(b, want) {
			// "add" also replaces, and works when caBundle is absent.
			ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: want})
		}
	}
	if len(ops) == 1 {
		return nil, nil
	}
	p, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("marshal caBundle patch: %w", err)
	}
	return p, nil
}

// record logs a step and records it as an Event on the Secret. existed
// says whether the Secret existed before (for actGenerate); m is the
// material written (nil for bundle patches).
func (r *Rotator) record(sec *corev1.Secret, related runtime.Object, a action, existed bool, m *material) {
	typ, reason, note := corev1.EventTypeNormal, "", a.reason
	cn := func(kp *keyPair) string {
		if kp == nil {
			return ""
		}
		return kp.cert.Subject.CommonName
	}
	switch a.kind {
	case actGenerate:
		reason = ReasonCertificatesCreated
		if existed {
			typ, reason = corev1.EventTypeWarning, ReasonCertificatesRegenerated
		}
		note = fmt.Sprintf("Generated CA %s and a serving certificate: %s", cn(m.ca), a.reason)
	case actIssueServing:
		reason = ReasonServingIssued
		note = fmt.Sprintf("Issued a serving certificate valid until %s from CA %s: %s",
			m.serving.cert.NotAfter.UTC().Format(time.RFC3339), cn(m.ca), a.reason)
	case actStartCARotation:
		reason = ReasonCARotationStarted
		note = fmt.Sprintf("Added CA %s to the caBundles; it issues once every bundle has held it for %s: %s", cn(m.next), r.opts.Overlap, a.reason)
	case actDiscardNextCA:
		typ, reason = corev1.EventTypeWarning, ReasonNextCADiscarded
		note = "Discarded the next CA: " + a.reason
	case actRecordPublished:
		reason = ReasonCARotationPublished
		note = fmt.Sprintf("Every caBundle trusts CA %s; it issues from %s", cn(m.next), m.nextPublishedAt.Add(r.opts.Overlap).UTC().Format(time.RFC3339))
	case actSwitchCA:
		reason = ReasonCARotationSwitched
		note = fmt.Sprintf("CA %s now issues the serving certificate; the old CA stays in the caBundles until %s: %s",
			cn(m.ca), m.switchedAt.Add(r.opts.Overlap).UTC().Format(time.RFC3339), a.reason)
	case actRecordSwitched:
		reason = ReasonCASwitchRecorded
	case actDropPreviousCA:
		reason = ReasonCARotationCompleted
		note = "Removed the previous CA from the caBundles: " + a.reason
	case actSyncBundle:
		reason = ReasonCABundleUpdated
		note = fmt.Sprintf("Patched %s: %s", a.config, a.reason)
	}
	r.log.Info("certificate step", "step", string(a.kind), "reason", a.reason)
	if r.opts.Recorder != nil && sec != nil {
		r.opts.Recorder.Eventf(sec, related, typ, reason, string(a.kind), "%s", note)
	}
}
