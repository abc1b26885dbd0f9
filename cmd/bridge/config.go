package main

import (
	"flag"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/janitor"
)

// config is what the command line asks for.
type config struct {
	listen    string
	certDir   string
	namespace string
	replica   string
	origins   string
	lease     time.Duration
	sweep     time.Duration
	pprofAt   string
	apiQPS    float64
	apiBurst  int
	httpIdle  time.Duration
	metrics   metricsOptions
	opts      bridge.Options
	zap       zap.Options
}

// bindFlags registers c's flags, and the logger's, on fs. podNamespace
// and hostname are the defaults of --namespace and --replica.
func (c *config) bindFlags(fs *flag.FlagSet, podNamespace, hostname string) {
	fs.StringVar(&c.listen, "listen-address", ":8443", "address the bridge serves on")
	fs.StringVar(&c.certDir, "cert-dir", "", "directory with tls.crt and tls.key, reloaded when they change; empty serves plain HTTP (TLS terminated in front of the bridge)")
	fs.StringVar(&c.namespace, "namespace", podNamespace, "the bridge's namespace, where session Leases and SSH host-key pins live (default: $POD_NAMESPACE)")
	fs.StringVar(&c.replica, "replica", hostname, "this replica's name in session Leases (default: $POD_NAME or the host name)")
	fs.StringVar(&c.origins, "allowed-origins", "", "comma-separated web origins (scheme://host[:port]) besides the bridge's own that may open sessions (\"*\" for any). "+
		"The bridge's own origin is the scheme it is reached with (https with --cert-dir, else http) and the request's Host; "+
		"behind a proxy that terminates TLS, list the public origin (https://bridge.example.com) here: forwarded headers are not trusted")
	fs.StringVar(&c.pprofAt, "pprof-bind-address", "", "address to serve net/http/pprof on, for profiling (empty: off); it has no authentication, so bind it to localhost")
	fs.DurationVar(&c.httpIdle, "http-idle-timeout", defaultHTTPIdleTimeout, "close a keep-alive HTTP connection after this long without a request (WebSocket sessions are not affected: see --idle-timeout)")
	fs.StringVar(&c.metrics.bindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" turns it off); callers need a bearer token whose user may get the non-resource URL /metrics (TokenReview and SubjectAccessReview)")
	fs.BoolVar(&c.metrics.secure, "metrics-secure", true, "serve /metrics over HTTPS, with the --cert-dir certificate or else a self-signed one; false serves plain HTTP, still authenticated")
	fs.DurationVar(&c.lease, "lease-duration", 15*time.Second, "how long a crashed replica's sessions stay held")
	fs.DurationVar(&c.sweep, "sweep-interval", janitor.DefaultEvery, "how often to delete the session Leases and SSH host-key pins of VMs that no longer exist")
	fs.Float64Var(&c.apiQPS, "kube-api-qps", 0, "requests per second the bridge may send the API server to open sessions; 0 sets no client-side limit and leaves the pacing to the API server's Priority and Fairness")
	fs.IntVar(&c.apiBurst, "kube-api-burst", 0, "requests the bridge may send at once above --kube-api-qps (at least the QPS)")
	fs.DurationVar(&c.opts.IdleTimeout, "idle-timeout", bridge.DefaultIdleTimeout, "close a session after this long without user input")
	fs.DurationVar(&c.opts.PingInterval, "ping-interval", bridge.DefaultPingInterval, "WebSocket ping interval")
	fs.IntVar(&c.opts.SSHPort, "ssh-port", bridge.DefaultSSHPort, "the guests' SSH port")
	fs.BoolVar(&c.opts.VNCAdaptive, "vnc-adaptive", true, "adapt VNC quality to each client's link (a session overrides it with ?adaptive=false)")
	fs.DurationVar(&c.opts.VNCLogInterval, "vnc-log-interval", time.Minute, "how often each VNC session logs its throughput (0 never)")
	fs.DurationVar(&c.opts.ActivityInterval, "activity-interval", api.ActivityInterval, "how often, at most, a VM's activity Lease is written on user input, across replicas (for tests; the lifecycle's idle timeouts assume the default)")
	c.zap.BindFlags(fs)
}

// metricsOptions are the /metrics server's options: its flags, and the
// bridge's --cert-dir.
func (c *config) metricsOptions() metricsOptions {
	o := c.metrics
	o.certDir = c.certDir
	return o
}

// bridgeConfig is the bridge's configuration from c, with the logger and
// the registry its metrics go to.
func (c *config) bridgeConfig(log logr.Logger, reg prometheus.Registerer) bridge.Config {
	opts := c.opts
	if c.origins != "" {
		opts.AllowedOrigins = strings.Split(c.origins, ",")
	}
	return bridge.Config{
		Namespace: c.namespace, Replica: c.replica, LeaseDuration: c.lease, SweepEvery: c.sweep, Options: opts,
		APIQPS: float32(c.apiQPS), APIBurst: c.apiBurst,
		Log: log, Registerer: reg,
	}
}
