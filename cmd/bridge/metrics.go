package main

import (
	"crypto/tls"
	"fmt"

	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions configure the /metrics server.
type metricsOptions struct {
	// bindAddress is where it listens; "0" turns it off.
	bindAddress string
	// secure serves HTTPS; false serves plain HTTP, still authenticated.
	secure bool
	// certDir holds tls.crt and tls.key (the bridge's --cert-dir, reloaded
	// when they change); without them controller-runtime serves a
	// self-signed certificate.
	certDir string
}

// metricsRegistry is where the bridge's metrics go and what /metrics
// serves: controller-runtime's registry, the one its metrics server
// gathers. controller-runtime registers the Go runtime and process
// collectors and client-go's request metrics there.
func metricsRegistry() ctrlmetrics.RegistererGatherer { return ctrlmetrics.Registry }

// newMetricsServer serves metricsRegistry on o.bindAddress with
// controller-runtime's metrics server, as its manager does: each request's
// bearer token is checked with a TokenReview (metricsAuth), and a
// SubjectAccessReview asks whether its
// user may get the non-resource URL /metrics (ClusterRole
// virtstation-bridge-metrics-reader grants it), both through cfg, as the
// bridge's ServiceAccount. It returns nil when o.bindAddress is "0".
func newMetricsServer(o metricsOptions, cfg *rest.Config) (metricsserver.Server, error) {
	if o.bindAddress == "0" {
		return nil, nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	opts := metricsserver.Options{
		BindAddress:    o.bindAddress,
		SecureServing:  o.secure,
		FilterProvider: metricsAuth,
		// HTTP/2 off, as kubebuilder scaffolds it: its rapid-reset and
		// stream-cancellation CVEs are not worth it for one scraper.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if o.certDir != "" {
		opts.CertDir = o.certDir
	}
	srv, err := metricsserver.NewServer(opts, cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	return srv, nil
}
