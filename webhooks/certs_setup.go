package webhooks

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/virtstation/virtstation/certs"
)

// CertMode says who provides the webhook server's certificate.
type CertMode string

const (
	// CertModeExternal means tls.crt and tls.key in the cert dir come from
	// outside (cert-manager through a Secret volume); the server reloads
	// them when they change, and cert-manager's cainjector fills caBundle.
	CertModeExternal CertMode = "external"
	// CertModeSelf means the webhook keeps its own CA and serving
	// certificate in a Secret, writes them into the cert dir and keeps the
	// webhook configurations' caBundle in sync (package certs).
	CertModeSelf CertMode = "self"
)

// CertOptions configures SetupCerts.
type CertOptions struct {
	Mode CertMode
	// Namespace is the install namespace, where the Secret and the Service
	// live.
	Namespace string
	// CertDir is the webhook server's cert dir.
	CertDir string
	// SecretName, ServiceName, MutatingConfig and ValidatingConfig name the
	// Secret, the webhook Service and the two webhook configurations;
	// empty means the certs package's defaults and the shipped names.
	SecretName       string
	ServiceName      string
	MutatingConfig   string
	ValidatingConfig string
}

// The shipped webhook configurations (config/webhook/manifests.yaml).
const (
	DefaultMutatingConfig   = "virtstation-mutating"
	DefaultValidatingConfig = "virtstation-validating"
)

// SetupCerts does nothing in external mode. In self mode it writes a key
// pair into the cert dir at once (the webhook server does not start
// without one), adds the certificate Rotator to mgr, and a readiness check
// that holds until the replica serves the Secret's certificate. Call it
// before mgr.Start.
func SetupCerts(ctx context.Context, mgr ctrl.Manager, o CertOptions) error {
	switch o.Mode {
	case CertModeExternal, "":
		return nil
	case CertModeSelf:
	default:
		return fmt.Errorf("unknown certificate mode %q: want %q or %q", o.Mode, CertModeSelf, CertModeExternal)
	}
	if o.MutatingConfig == "" {
		o.MutatingConfig = DefaultMutatingConfig
	}
	if o.ValidatingConfig == "" {
		o.ValidatingConfig = DefaultValidatingConfig
	}
	client, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("certificate rotator client: %w", err)
	}
	r, err := certs.New(client, certs.Options{
		Namespace:                       o.Namespace,
		SecretName:                      o.SecretName,
		ServiceName:                     o.ServiceName,
		MutatingWebhookConfigurations:   []string{o.MutatingConfig},
		ValidatingWebhookConfigurations: []string{o.ValidatingConfig},
		CertDir:                         o.CertDir,
		Elected:                         mgr.Elected(),
		Recorder:                        mgr.GetEventRecorder("virtstation-certs"),
		Logger:                          ctrl.Log.WithName("certs"),
	})
	if err != nil {
		return err
	}
	if err := r.Bootstrap(ctx); err != nil {
		return fmt.Errorf("bootstrap serving certificate: %w", err)
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add certificate rotator: %w", err)
	}
	return mgr.AddReadyzCheck("certificates", r.ReadyCheck)
}
