package webhooks

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ServerOptions configures the TLS webhook server.
type ServerOptions struct {
	// Host and Port to listen on; an empty host means all interfaces.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key. The server watches them and serves
	// a renewed certificate without a restart.
	CertDir string
	// ClientCA, when set, is the CA a caller's client certificate must chain
	// to (LoadClientCA): the server then refuses, in the TLS handshake,
	// every caller without one. The API server presents such a certificate
	// when its AdmissionConfiguration gives the webhook a kubeConfigFile
	// with a client certificate.
	ClientCA *ClientCA
	// ClientNames, when set with ClientCA, are the names a client
	// certificate may carry, as its subject common name or a DNS name; any
	// other certificate from the CA is refused.
	ClientNames []string
	// MaxInFlight is how many admissions the server works on at once (see
	// InFlight); 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Metrics, when set, is where the admission limit's metric is
	// registered (controller-runtime's metrics.Registry in the binary).
	Metrics prometheus.Registerer
}

// NewServer returns the webhook server: TLS 1.2 or newer, certificates read
// from CertDir and hot-reloaded by controller-runtime's certwatcher, with
// ClientCA client certificates required, and every handler registered on
// it behind one InFlight limit of MaxInFlight admissions.
// A metric that cannot be registered (Metrics already has it) is logged
// and left out: the limit itself holds.
func NewServer(o ServerOptions) webhook.Server {
	opts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if o.ClientCA != nil {
		opts = append(opts, func(c *tls.Config) { requireClientCert(c, o.ClientCA, o.ClientNames) })
	}
	limit, err := NewInFlight(o.MaxInFlight, o.Metrics)
	if err != nil {
		logf.Log.WithName("webhook-limit").Error(err, "admission limit metric not exported")
		limit, _ = NewInFlight(o.MaxInFlight, nil) // cannot fail without a registry
	}
	return limitedServer{
		Server: webhook.NewServer(webhook.Options{
			Host:    o.Host,
			Port:    o.Port,
			CertDir: o.CertDir,
			TLSOpts: opts,
		}),
		limit: limit,
	}
}
