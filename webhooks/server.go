package webhooks

import (
	"crypto/tls"

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
}

// NewServer returns the webhook server: TLS 1.2 or newer, certificates read
// from CertDir and hot-reloaded by controller-runtime's certwatcher, and,
// with ClientCA, client certificates required.
func NewServer(o ServerOptions) webhook.Server {
	opts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if o.ClientCA != nil {
		opts = append(opts, func(c *tls.Config) { requireClientCert(c, o.ClientCA, o.ClientNames) })
	}
	return webhook.NewServer(webhook.Options{
		Host:    o.Host,
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: opts,
	})
}
