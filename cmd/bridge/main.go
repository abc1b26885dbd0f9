// Command virtstation-bridge serves VM consoles, VNC displays and SSH to
// browsers and CLIs over WebSockets (see package bridge).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/bridge/janitor"
)

// readHeaderTimeout bounds a request's headers; WebSocket sessions then
// live on their own deadlines.
const readHeaderTimeout = 10 * time.Second

// shutdownGrace lets sessions send their close frames and give their
// Leases back on SIGTERM.
const shutdownGrace = 5 * time.Second

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
	flag.StringVar(&origins, "allowed-origins", "", "comma-separated web origins besides the bridge's own that may open sessions (\"*\" for any)")
	flag.StringVar(&pprofAt, "pprof-bind-address", "", "address to serve net/http/pprof on, for profiling (empty: off); it has no authentication, so bind it to localhost")
	flag.DurationVar(&lease, "lease-duration", 15*time.Second, "how long a crashed replica's sessions stay held")
	flag.DurationVar(&sweep, "sweep-interval", janitor.DefaultEvery, "how often to delete the session Leases and SSH host-key pins of VMs that no longer exist")
	flag.Float64Var(&apiQPS, "kube-api-qps", 0, "requests per second the bridge may send the API server to open sessions; 0 sets no client-side limit and leaves the pacing to the API server's Priority and Fairness")
	flag.IntVar(&apiBurst, "kube-api-burst", 0, "requests the bridge may send at once above --kube-api-qps (at least the QPS)")
	flag.DurationVar(&opts.IdleTimeout, "idle-timeout", bridge.DefaultIdleTimeout, "close a session after this long without user input")
	flag.DurationVar(&opts.PingInterval, "ping-interval", bridge.DefaultPingInterval, "WebSocket ping interval")
	flag.IntVar(&opts.SSHPort, "ssh-port", bridge.DefaultSSHPort, "the guests' SSH port")
	flag.BoolVar(&opts.VNCAdaptive, "vnc-adaptive", true, "adapt VNC quality to each client's link (a session overrides it with ?adaptive=false)")
	flag.DurationVar(&opts.VNCLogInterval, "vnc-log-interval", time.Minute, "how often each VNC session logs its throughput (0 never)")
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

	ctx := ctrl.SetupSignalHandler()
	if pprofAt != "" {
		go func() {
			if err := servePprof(ctx, pprofAt); err != nil {
				log.Error(err, "serve pprof")
			}
		}()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := bridge.NewFromConfig(ctx, ctrl.GetConfigOrDie(), bridge.Config{
		Namespace: ns, Replica: replica, LeaseDuration: lease, SweepEvery: sweep, Options: opts,
		APIQPS: float32(apiQPS), APIBurst: apiBurst,
		Log: log, Registerer: reg, Gatherer: reg,
	})
	if err != nil {
		log.Error(err, "start the bridge")
		os.Exit(1)
	}
	if err := serve(ctx, listen, certDir, srv); err != nil {
		log.Error(err, "serve")
		os.Exit(1)
	}
}

// serve runs the HTTP server until ctx ends, with TLS from certDir when set,
// then waits for the sessions, which end with ctx, to close.
func serve(ctx context.Context, listen, certDir string, srv *bridge.Server) error {
	hs := &http.Server{Addr: listen, Handler: srv, ReadHeaderTimeout: readHeaderTimeout}
	errc := make(chan error, 2)
	if certDir != "" {
		cw, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
		if err != nil {
			return err
		}
		go func() { errc <- cw.Start(ctx) }()
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
		go func() { errc <- hs.ListenAndServeTLS("", "") }()
	} else {
		go func() { errc <- hs.ListenAndServe() }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// Shutdown does not wait for hijacked connections: the sessions run on
	// the bridge's own goroutines.
	_ = srv.Wait(sctx)
	return nil
}

// servePprof serves net/http/pprof on addr until ctx ends. It is off by
// default (--pprof-bind-address ""), like controller-runtime's manager
// option of the same name.
func servePprof(ctx context.Context, addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	context.AfterFunc(ctx, func() { _ = hs.Close() })
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
