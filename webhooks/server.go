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
}

// NewServer returns the webhook server: TLS 1.2 or newer, certificates read
// from CertDir and hot-reloaded by controller-runtime's certwatcher.
func NewServer(o ServerOptions) webhook.Server {
	return webhook.NewServer(webhook.Options{
		Host:    o.Host,
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }},
	})
}
