// Command virtstation-webhook serves Virtstation's admission webhooks and runs
// their helper reconcilers, as one controller-runtime manager.
package main

import (
	"flag"
	"math"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/certs"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/webhooks"
	"github.com/virtstation/virtstation/webhooks/audit"
)

func main() {
	var (
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
	)
	flag.IntVar(&port, "webhook-port", 9443, "port the webhook server listens on")
	flag.StringVar(&certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key; reloaded when they change")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it); callers need a bearer token whose user may get the non-resource URL /metrics (TokenReview and SubjectAccessReview)")
	flag.BoolVar(&metricsTLS, "metrics-secure", true, "serve /metrics over HTTPS with a self-signed certificate; false serves plain HTTP, still authenticated")
	flag.IntVar(&maxInFlight, "max-in-flight-admissions", webhooks.DefaultMaxInFlight, "admissions one replica works on at once; more wait up to a second, then are denied with 429. One at the object size limit (1.5 MiB) peaks at 7 to 19 MiB of heap: raise it only with the memory limit")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", true, "run the reconcilers on one replica at a time (webhooks serve on every replica)")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
	flag.StringVar(&namespace, "namespace", os.Getenv("POD_NAMESPACE"), "install namespace, where policy ConfigMaps live (default: $POD_NAMESPACE)")
	flag.DurationVar(&claimGrace, "claim-grace", claims.DefaultGrace, "how long a disk claim holds before its VM exists (it covers only the gap between the validating admission and the VM being stored); claims of VMs that never appear, forged ones included, are released after it")
	flag.StringVar((*string)(&certOpts.Mode), "cert-mode", string(webhooks.CertModeExternal), `who provides the serving certificate: "external" (files in --cert-dir, e.g. from cert-manager) or "self" (the webhook keeps its own CA in --cert-secret and the webhook configurations' caBundle in sync)`)
	flag.StringVar(&certOpts.SecretName, "cert-secret", certs.DefaultSecretName, "with --cert-mode=self: Secret in --namespace holding the CA and the serving certificate")
	flag.StringVar(&certOpts.ServiceName, "webhook-service", certs.DefaultServiceName, "with --cert-mode=self: the webhook Service in --namespace; the serving certificate is valid for its DNS names")
	flag.StringVar(&certOpts.MutatingConfig, "mutating-config", webhooks.DefaultMutatingConfig, "with --cert-mode=self: MutatingWebhookConfiguration whose caBundle is kept in sync")
	flag.StringVar(&certOpts.ValidatingConfig, "validating-config", webhooks.DefaultValidatingConfig, "with --cert-mode=self: ValidatingWebhookConfiguration whose caBundle is kept in sync")
	flag.StringVar(&clientCA, "client-ca-file", "", "PEM file of the CA that signs the API server's webhook client certificate; when set, callers without a certificate from it are refused in the TLS handshake (re-read when it changes)")
	flag.StringVar(&clientNames, "client-allowed-names", "", "with --client-ca-file: comma-separated names the client certificate must carry as its common name or a DNS name (default: any certificate from the CA)")
	flag.DurationVar(&auditEvery, "audit-interval", audit.DefaultInterval, "how often the policy audit re-evaluates every managed VM when nothing changed (changes to VMs, data disks, policies and modes are audited at once)")
	flag.BoolVar(&reports, "policy-reports", true, "publish the policy audit's results as wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace (needs the CRD)")
	flag.BoolVar(&openReports, "open-reports", false, "also publish them as openreports.io/v1alpha1 Reports (needs the CRD)")
	flag.IntVar(&headroom, "memory-limit-headroom", defaultMemoryLimitHeadroom, "percentage by which to lower the Go runtime's memory limit when GOMEMLIMIT is set (the chart sets it to the container's memory limit), for memory the runtime does not count")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	memBefore, memAfter, err := applyMemoryLimitHeadroom(headroom)
	if err != nil {
		log.Error(err, "memory limit")
		os.Exit(1)
	}
	if memBefore != math.MaxInt64 {
		log.Info("Go memory limit", "GOMEMLIMIT", memBefore, "applied", memAfter, "headroomPercent", headroom)
	}

	serverOpts := webhooks.ServerOptions{Port: port, CertDir: certDir, MaxInFlight: maxInFlight, Metrics: ctrlmetrics.Registry}
	if clientCA != "" {
		ca, err := webhooks.LoadClientCA(clientCA)
		if err != nil {
			log.Error(err, "load --client-ca-file")
			os.Exit(1)
		}
		serverOpts.ClientCA = ca
		for _, n := range strings.Split(clientNames, ",") {
			if n = strings.TrimSpace(n); n != "" {
				serverOpts.ClientNames = append(serverOpts.ClientNames, n)
			}
		}
	} else if clientNames != "" {
		log.Error(nil, "--client-allowed-names needs --client-ca-file")
		os.Exit(1)
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  webhooks.NewScheme(),
		Cache:                   webhooks.CacheOptions(namespace),
		Metrics:                 metricsOptions(metricsAddr, metricsTLS),
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "virtstation-webhook",
		LeaderElectionNamespace: leaderNS,
		WebhookServer:           webhooks.NewServer(serverOpts),
	})
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if namespace == "" {
		log.Error(nil, "set --namespace or POD_NAMESPACE to the install namespace")
		os.Exit(1)
	}
	if err := webhooks.Setup(ctx, mgr, webhooks.Options{
		Namespace: namespace, ClaimGrace: claimGrace,
		AuditInterval: auditEvery, NoPolicyReports: !reports, OpenReports: openReports,
	}); err != nil {
		log.Error(err, "set up webhooks")
		os.Exit(1)
	}
	certOpts.Namespace, certOpts.CertDir = namespace, certDir
	if err := webhooks.SetupCerts(ctx, mgr, certOpts); err != nil {
		log.Error(err, "set up certificates")
		os.Exit(1)
	}
	log.Info("starting", "webhookPort", port, "maxInFlightAdmissions", maxInFlight, "certDir", certDir, "clientCAFile", clientCA, "clientAllowedNames", serverOpts.ClientNames)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
