package main

import (
	"flag"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/certs"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/webhooks"
	"github.com/virtstation/virtstation/webhooks/audit"
)

// config is what the command line asks for.
type config struct {
	port        int
	certDir     string
	metricsAddr string
	metricsTLS  bool
	maxInFlight int
	headroom    int
	probeAddr   string
	leaderElect bool
	leaderNS    string
	namespace   string
	claimGrace  time.Duration
	certOpts    webhooks.CertOptions
	clientCA    string
	clientNames string
	auditEvery  time.Duration
	reports     bool
	openReports bool
	zap         zap.Options
}

// bindFlags registers c's flags, and the logger's, on fs. podNamespace is
// the default of --namespace.
func (c *config) bindFlags(fs *flag.FlagSet, podNamespace string) {
	fs.IntVar(&c.port, "webhook-port", 9443, "port the webhook server listens on")
	fs.StringVar(&c.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key; reloaded when they change")
	fs.StringVar(&c.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it); callers need a bearer token whose user may get the non-resource URL /metrics (TokenReview and SubjectAccessReview)")
	fs.BoolVar(&c.metricsTLS, "metrics-secure", true, "serve /metrics over HTTPS with a self-signed certificate; false serves plain HTTP, still authenticated")
	fs.IntVar(&c.maxInFlight, "max-in-flight-admissions", webhooks.DefaultMaxInFlight, "admissions one replica works on at once; more wait up to a second, then are denied with 429. One at the object size limit (1.5 MiB) peaks at 7 to 19 MiB of heap: raise it only with the memory limit")
	fs.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&c.leaderElect, "leader-elect", true, "run the reconcilers on one replica at a time (webhooks serve on every replica)")
	fs.StringVar(&c.leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	fs.StringVar(&c.namespace, "namespace", podNamespace, "install namespace, where policy ConfigMaps live (default: $POD_NAMESPACE)")
	fs.DurationVar(&c.claimGrace, "claim-grace", claims.DefaultGrace, "how long a disk claim holds before its VM exists (it covers only the gap between the validating admission and the VM being stored); claims of VMs that never appear, forged ones included, are released after it")
	fs.StringVar((*string)(&c.certOpts.Mode), "cert-mode", string(webhooks.CertModeExternal), `who provides the serving certificate: "external" (files in --cert-dir, e.g. from cert-manager) or "self" (the webhook keeps its own CA in --cert-secret and the webhook configurations' caBundle in sync)`)
	fs.StringVar(&c.certOpts.SecretName, "cert-secret", certs.DefaultSecretName, "with --cert-mode=self: Secret in --namespace holding the CA and the serving certificate")
	fs.StringVar(&c.certOpts.ServiceName, "webhook-service", certs.DefaultServiceName, "with --cert-mode=self: the webhook Service in --namespace; the serving certificate is valid for its DNS names")
	fs.StringVar(&c.certOpts.MutatingConfig, "mutating-config", webhooks.DefaultMutatingConfig, "with --cert-mode=self: MutatingWebhookConfiguration whose caBundle is kept in sync")
	fs.StringVar(&c.certOpts.ValidatingConfig, "validating-config", webhooks.DefaultValidatingConfig, "with --cert-mode=self: ValidatingWebhookConfiguration whose caBundle is kept in sync")
	fs.StringVar(&c.clientCA, "client-ca-file", "", "PEM file of the CA that signs the API server's webhook client certificate; when set, callers without a certificate from it are refused in the TLS handshake (re-read when it changes)")
	fs.StringVar(&c.clientNames, "client-allowed-names", "", "with --client-ca-file: comma-separated names the client certificate must carry as its common name or a DNS name (default: any certificate from the CA)")
	fs.DurationVar(&c.auditEvery, "audit-interval", audit.DefaultInterval, "how often the policy audit re-evaluates every managed VM when nothing changed (changes to VMs, data disks, policies and modes are audited at once)")
	fs.BoolVar(&c.reports, "policy-reports", true, "publish the policy audit's results as wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace (needs the CRD)")
	fs.BoolVar(&c.openReports, "open-reports", false, "also publish them as openreports.io/v1alpha1 Reports (needs the CRD)")
	fs.IntVar(&c.headroom, "memory-limit-headroom", defaultMemoryLimitHeadroom, "percentage by which to lower the Go runtime's memory limit when GOMEMLIMIT is set (the chart sets it to the container's memory limit), for memory the runtime does not count")
	c.zap.BindFlags(fs)
}

// serverOptions are the webhook server's options, with the client CA
// loaded from --client-ca-file. A failure is fatal, with its message.
func (c *config) serverOptions() (webhooks.ServerOptions, *fatal) {
	o := webhooks.ServerOptions{Port: c.port, CertDir: c.certDir, MaxInFlight: c.maxInFlight, Metrics: ctrlmetrics.Registry}
	if c.clientCA == "" {
		if c.clientNames != "" {
			return o, &fatal{msg: "--client-allowed-names needs --client-ca-file"}
		}
		return o, nil
	}
	ca, err := webhooks.LoadClientCA(c.clientCA)
	if err != nil {
		return o, &fatal{msg: "load --client-ca-file", err: err}
	}
	o.ClientCA = ca
	for _, n := range strings.Split(c.clientNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			o.ClientNames = append(o.ClientNames, n)
		}
	}
	return o, nil
}

// setupOptions are webhooks.Setup's options.
func (c *config) setupOptions() webhooks.Options {
	return webhooks.Options{
		Namespace: c.namespace, ClaimGrace: c.claimGrace,
		AuditInterval: c.auditEvery, NoPolicyReports: !c.reports, OpenReports: c.openReports,
	}
}

// fatal is why run stopped: main logs msg, with err if there is one, and
// exits with status 1.
type fatal struct {
	msg string
	err error
}
