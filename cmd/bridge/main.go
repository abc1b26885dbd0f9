// Command virtstation-bridge serves VM consoles, VNC displays and SSH to
// browsers and CLIs over WebSockets (see package bridge).
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/janitor"
)

func main() {
	var (
		listen   string
		certDir  string
		ns       string
		replica  string
		origins  string
		lease    time.Duration
		sweep    time.Duration
		pprofAt  string
		apiQPS   float64
		apiBurst int
		httpIdle time.Duration
		metrics  metricsOptions
		opts     bridge.Options
		hostname = os.Getenv("POD_NAME")
	)
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	flag.StringVar(&listen, "listen-address", ":8443", "address the bridge serves on")
	flag.StringVar(&certDir, "cert-dir", "", "directory with tls.crt and tls.key, reloaded when they change; empty serves plain HTTP (TLS terminated in front of the bridge)")
	flag.StringVar(&ns, "namespace", os.Getenv("POD_NAMESPACE"), "the bridge's namespace, where session Leases and SSH host-key pins live (default: $POD_NAMESPACE)")
	flag.StringVar(&replica, "replica", hostname, "this replica's name in session Leases (default: $POD_NAME or the host name)")
	flag.StringVar(&origins, "allowed-origins", "", "comma-separated web origins (scheme://host[:port]) besides the bridge's own that may open sessions (\"*\" for any). "+
		"The bridge's own origin is the scheme it is reached with (https with --cert-dir, else http) and the request's Host; "+
		"behind a proxy that terminates TLS, list the public origin (https://bridge.example.com) here: forwarded headers are not trusted")
	flag.StringVar(&pprofAt, "pprof-bind-address", "", "address to serve net/http/pprof on, for profiling (empty: off); it has no authentication, so bind it to localhost")
	flag.DurationVar(&httpIdle, "http-idle-timeout", defaultHTTPIdleTimeout, "close a keep-alive HTTP connection after this long without a request (WebSocket sessions are not affected: see --idle-timeout)")
	flag.StringVar(&metrics.bindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (\"0\" turns it off); callers need a bearer token whose user may get the non-resource URL /metrics (TokenReview and SubjectAccessReview)")
	flag.BoolVar(&metrics.secure, "metrics-secure", true, "serve /metrics over HTTPS, with the --cert-dir certificate or else a self-signed one; false serves plain HTTP, still authenticated")
	flag.DurationVar(&lease, "lease-duration", 15*time.Second, "how long a crashed replica's sessions stay held")
	flag.DurationVar(&sweep, "sweep-interval", janitor.DefaultEvery, "how often to delete the session Leases and SSH host-key pins of VMs that no longer exist")
	flag.Float64Var(&apiQPS, "kube-api-qps", 0, "requests per second the bridge may send the API server to open sessions; 0 sets no client-side limit and leaves the pacing to the API server's Priority and Fairness")
	flag.IntVar(&apiBurst, "kube-api-burst", 0, "requests the bridge may send at once above --kube-api-qps (at least the QPS)")
	flag.DurationVar(&opts.IdleTimeout, "idle-timeout", bridge.DefaultIdleTimeout, "close a session after this long without user input")
	flag.DurationVar(&opts.PingInterval, "ping-interval", bridge.DefaultPingInterval, "WebSocket ping interval")
	flag.IntVar(&opts.SSHPort, "ssh-port", bridge.DefaultSSHPort, "the guests' SSH port")
	flag.BoolVar(&opts.VNCAdaptive, "vnc-adaptive", true, "adapt VNC quality to each client's link (a session overrides it with ?adaptive=false)")
	flag.DurationVar(&opts.VNCLogInterval, "vnc-log-interval", time.Minute, "how often each VNC session logs its throughput (0 never)")
	flag.DurationVar(&opts.ActivityInterval, "activity-interval", api.ActivityInterval, "how often, at most, a VM's activity Lease is written on user input, across replicas (for tests; the lifecycle's idle timeouts assume the default)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("bridge")
	if ns == "" {
		log.Error(nil, "set --namespace or POD_NAMESPACE to the bridge's namespace")
		os.Exit(1)
	}
	if origins != "" {
		opts.AllowedOrigins = strings.Split(origins, ",")
	}

	metrics.certDir = certDir

	ctx, stop := context.WithCancelCause(ctrl.SetupSignalHandler())
	if pprofAt != "" {
		go func() {
			if err := servePprof(ctx, pprofAt, httpIdle); err != nil {
				log.Error(err, "serve pprof")
			}
		}()
	}
	cfg := ctrl.GetConfigOrDie()
	// The bridge's metrics, and /metrics, are on their own port, behind
	// authentication and authorization: they name the VMs with live
	// sessions.
	reg := metricsRegistry()
	ms, err := newMetricsServer(metrics, cfg)
	if err != nil {
		log.Error(err, "metrics")
		os.Exit(1)
	}
	if ms != nil {
		go func() {
			if err := ms.Start(ctx); err != nil {
				stop(err)
			}
		}()
	}
	srv, err := bridge.NewFromConfig(ctx, cfg, bridge.Config{
		Namespace: ns, Replica: replica, LeaseDuration: lease, SweepEvery: sweep, Options: opts,
		APIQPS: float32(apiQPS), APIBurst: apiBurst,
		Log: log, Registerer: reg,
	})
	if err != nil {
		log.Error(err, "start the bridge")
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error(err, "listen")
		os.Exit(1)
	}
	if err := serve(ctx, ln, httpOptions{certDir: certDir, idleTimeout: httpIdle, log: log}, srv, srv.Wait); err != nil {
		log.Error(err, "serve")
		os.Exit(1)
	}
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		log.Error(err, "serve metrics")
		os.Exit(1)
	}
}
