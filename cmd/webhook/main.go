// Command virtstation-webhook serves Virtstation's admission webhooks and runs
// their helper reconcilers, as one controller-runtime manager.
package main

import (
	"flag"
	"math"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/webhooks"
)

func main() {
	var c config
	c.bindFlags(flag.CommandLine, os.Getenv("POD_NAMESPACE"))
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&c.zap)))
	log := ctrl.Log.WithName("setup")
	if f := run(c, log); f != nil {
		log.Error(f.err, f.msg)
		os.Exit(1)
	}
}

// run sets the memory limit, and serves the webhooks and runs their
// reconcilers as c asks, until the process is told to stop.
func run(c config, log logr.Logger) *fatal {
	memBefore, memAfter, err := applyMemoryLimitHeadroom(c.headroom)
	if err != nil {
		return &fatal{msg: "memory limit", err: err}
	}
	if memBefore != math.MaxInt64 {
		log.Info("Go memory limit", "GOMEMLIMIT", memBefore, "applied", memAfter, "headroomPercent", c.headroom)
	}
	serverOpts, f := c.serverOptions()
	if f != nil {
		return f
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  webhooks.NewScheme(),
		Cache:                   webhooks.CacheOptions(c.namespace),
		Metrics:                 metricsOptions(c.metricsAddr, c.metricsTLS),
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        "virtstation-webhook",
		LeaderElectionNamespace: c.leaderNS,
		WebhookServer:           webhooks.NewServer(serverOpts),
	})
	if err != nil {
		return &fatal{msg: "create manager", err: err}
	}
	ctx := ctrl.SetupSignalHandler()
	if c.namespace == "" {
		return &fatal{msg: "set --namespace or POD_NAMESPACE to the install namespace"}
	}
	if err := webhooks.Setup(ctx, mgr, c.setupOptions()); err != nil {
		return &fatal{msg: "set up webhooks", err: err}
	}
	certOpts := c.certOpts
	certOpts.Namespace, certOpts.CertDir = c.namespace, c.certDir
	if err := webhooks.SetupCerts(ctx, mgr, certOpts); err != nil {
		return &fatal{msg: "set up certificates", err: err}
	}
	log.Info("starting", "webhookPort", c.port, "maxInFlightAdmissions", c.maxInFlight, "certDir", c.certDir, "clientCAFile", c.clientCA, "clientAllowedNames", serverOpts.ClientNames)
	if err := mgr.Start(ctx); err != nil {
		return &fatal{msg: "manager stopped", err: err}
	}
	return nil
}
