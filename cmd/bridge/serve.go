package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Timeouts of the bridge's HTTP servers. WebSocket sessions are hijacked
// connections, which these do not touch: they live on their own deadlines
// (package relay).
const (
	// readHeaderTimeout bounds a request's headers, so a client that
	// opens a connection and sends nothing holds it for this long at most.
	readHeaderTimeout = 10 * time.Second
	// defaultHTTPIdleTimeout closes a keep-alive connection that has sent
	// no request for this long. It is Go's http.DefaultTransport's idle
	// timeout and controller-runtime's servers': clients that reuse
	// connections close theirs first. Without it a keep-alive connection
	// stayed open for as long as the client kept it.
	defaultHTTPIdleTimeout = 90 * time.Second
	// shutdownGrace lets sessions send their close frames and give their
	// Leases back on SIGTERM.
	shutdownGrace = 5 * time.Second
)

// httpOptions configure the bridge's public HTTP server.
type httpOptions struct {
	// certDir holds tls.crt and tls.key, reloaded when they change; empty
	// serves plain HTTP.
	certDir string
	// idleTimeout closes keep-alive connections idle this long.
	idleTimeout time.Duration
	// log gets what goes wrong at shutdown that is no reason to fail.
	log logr.Logger
}

// newHTTPServer is every HTTP server the bridge runs: h with the header
// and idle timeouts.
func newHTTPServer(h http.Handler, idleTimeout time.Duration) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
}

// serve runs h on ln until ctx ends, with TLS from o.certDir when set, then
// waits (with wait, when not nil) for the sessions, which end with ctx, to
// close.
func serve(ctx context.Context, ln net.Listener, o httpOptions, h http.Handler, wait func(context.Context) error) error {
	hs := newHTTPServer(h, o.idleTimeout)
	errc := make(chan error, 2)
	if o.certDir != "" {
		cw, err := certwatcher.New(filepath.Join(o.certDir, "tls.crt"), filepath.Join(o.certDir, "tls.key"))
		if err != nil {
			return err
		}
		go func() { errc <- cw.Start(ctx) }()
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
		go func() { errc <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- hs.Serve(ln) }()
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
	if wait != nil {
		if err := wait(sctx); err != nil {
			o.log.Error(err, "sessions still open after the shutdown grace; their Leases expire with this replica's heartbeat", "grace", shutdownGrace)
		}
	}
	return nil
}

// servePprof serves net/http/pprof on addr until ctx ends. It is off by
// default (--pprof-bind-address ""), like controller-runtime's manager
// option of the same name.
func servePprof(ctx context.Context, addr string, idleTimeout time.Duration) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := newHTTPServer(mux, idleTimeout)
	hs.Addr = addr
	context.AfterFunc(ctx, func() { _ = hs.Close() })
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
