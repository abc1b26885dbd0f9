package main

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions is the manager's /metrics server: on bindAddress ("0"
// turns it off), over HTTPS when secure (a self-signed certificate: the
// scraper authenticates itself with its token, and the webhook's serving
// certificate may be written only after the manager starts), and every
// scrape authenticated with a TokenReview and authorized with a
// SubjectAccessReview for get on the non-resource URL /metrics, by
// controller-runtime's filter, through the webhook's own ServiceAccount
// (which config/rbac/webhook_role.yaml lets create both). ClusterRole
// virtstation-webhook-metrics-reader grants a scraper that get. The
// metrics name VMs and policy modules, so they are not public.
func metricsOptions(bindAddress string, secure bool) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    bindAddress,
		SecureServing:  secure,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// HTTP/2 off, as kubebuilder scaffolds it: its rapid-reset and
		// stream-cancellation CVEs are not worth it for one scraper.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}
