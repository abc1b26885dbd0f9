// Command virtstation-bridge serves VM consoles, VNC displays and SSH to
// browsers and CLIs over WebSockets (see package bridge).
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/bridge"
)

func main() {
	hostname := os.Getenv("POD_NAME")
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	var c config
	c.bindFlags(flag.CommandLine, os.Getenv("POD_NAMESPACE"), hostname)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&c.zap)))
	log := ctrl.Log.WithName("bridge")
	if f := run(c, log); f != nil {
		log.Error(f.err, f.msg)
		os.Exit(1)
	}
}

// fatal is why run stopped: main logs msg, with err if there is one, and
// exits with status 1.
type fatal struct {
	msg string
	err error
}

// run serves the bridge, /metrics and pprof as c asks, until the process
// is told to stop.
func run(c config, log logr.Logger) *fatal {
	if c.namespace == "" {
		return &fatal{msg: "set --namespace or POD_NAMESPACE to the bridge's namespace"}
	}
	ctx, stop := context.WithCancelCause(ctrl.SetupSignalHandler())
	defer stop(nil) // the process exits next
	if c.pprofAt != "" {
		go func() {
			if err := servePprof(ctx, c.pprofAt, c.httpIdle); err != nil {
				log.Error(err, "serve pprof")
			}
		}()
	}
	cfg := ctrl.GetConfigOrDie()
	// The bridge's metrics, and /metrics, are on their own port, behind
	// authentication and authorization: they name the VMs with live
	// sessions.
	reg := metricsRegistry()
	ms, err := newMetricsServer(c.metricsOptions(), cfg)
	if err != nil {
		return &fatal{msg: "metrics", err: err}
	}
	if ms != nil {
		go func() {
			if err := ms.Start(ctx); err != nil {
				stop(err)
			}
		}()
	}
	srv, err := bridge.NewFromConfig(ctx, cfg, c.bridgeConfig(log, reg))
	if err != nil {
		return &fatal{msg: "start the bridge", err: err}
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return &fatal{msg: "listen", err: err}
	}
	if err := serve(ctx, ln, httpOptions{certDir: c.certDir, idleTimeout: c.httpIdle, log: log}, srv, srv.Wait); err != nil {
		return &fatal{msg: "serve", err: err}
	}
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		return &fatal{msg: "serve metrics", err: err}
	}
	return nil
}
