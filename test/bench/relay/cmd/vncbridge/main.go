// Command vncbridge runs the bridge's VNC path alone, as bridge/ws.go
// assembles it, for the relay benchmark: for each client WebSocket it dials
// -upstream (the API server's VNC subresource, or a stand-in), wraps both in
// relay.WS with the bridge's read limits and timeouts, and runs relay.Relay
// with a vnc.Proxy between them, the adaptive controller on when the URL
// asks for ?adaptive=on. Byte counts and VNC measurements go to Prometheus
// counters and histograms, as the bridge's do. It prints
// "listening on HOST:PORT" once it accepts connections, and one "session"
// line per ended session with what the proxy saw.
//
// What it leaves out of the bridge: authentication, authorization, the
// session Lease, and TLS on either side (the benchmark runs over loopback).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// The bridge's limits (bridge/options.go and bridge/ws.go).
const (
	// vncReadLimit is the bridge's vncReadLimit: a 1 MiB ClientCutText
	// with room for framing.
	vncReadLimit = 1<<20 + 64<<10
	// upstreamReadLimit is the bridge's bound on a message from KubeVirt.
	upstreamReadLimit = 4 << 20
	// pingInterval, writeTimeout and idleTimeout are the bridge's defaults.
	pingInterval = 30 * time.Second
	writeTimeout = 30 * time.Second
	idleTimeout  = 6 * time.Hour
	// handshakeTimeout bounds each WebSocket handshake.
	handshakeTimeout = 10 * time.Second
)

// clientSubprotocols are the bridge's, in its order of preference.
var clientSubprotocols = []string{"plain.kubevirt.io", "binary.kubevirt.io", "binary"}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "ws:// URL of the VNC upstream")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here, ended by SIGTERM")
	flag.Parse()
	if *cpuProfile != "" {
		stop, err := profile(*cpuProfile)
		if err != nil {
			log.Fatalf("vncbridge: %v", err)
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		go func() {
			<-sig
			stop()
			os.Exit(0)
		}()
	}
	if *upstream == "" {
		log.Fatal("vncbridge: -upstream is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("vncbridge: %v", err)
	}
	m := newMetrics()
	upgrader := websocket.Upgrader{
		HandshakeTimeout: handshakeTimeout,
		Subprotocols:     clientSubprotocols,
		CheckOrigin:      func(*http.Request) bool { return true },
		WriteBufferSize:  relay.WriteBufferSize,
		WriteBufferPool:  relay.WriteBufferPool(),
	}
	dialer := websocket.Dialer{HandshakeTimeout: handshakeTimeout, Subprotocols: []string{"plain.kubevirt.io"},
		NetDialContext: relay.DialReadAhead, ReadBufferSize: relay.ReadBufferSize,
		WriteBufferSize: relay.WriteBufferSize, WriteBufferPool: relay.WriteBufferPool()}
	ctx := context.Background()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upConn, _, err := dialer.DialContext(r.Context(), *upstream, nil) //nolint:contextcheck // the upstream dial belongs to this request; ctx is the bridge's lifetime
		if err != nil {
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
			log.Printf("vncbridge: dial upstream: %v", err)
			return
		}
		up := relay.NewWS(upConn, relay.WSOptions{ReadLimit: upstreamReadLimit, PingInterval: pingInterval, WriteTimeout: writeTimeout, Coalesce: true})
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			_ = up.Close(websocket.CloseNormalClosure, "client handshake failed")
			return
		}
		client := relay.NewWS(conn, relay.WSOptions{ReadLimit: vncReadLimit, PingInterval: pingInterval, WriteTimeout: writeTimeout})
		adaptive := r.URL.Query().Get("adaptive") == "on"
		obs := &observer{m: m}
		end := relay.Relay(ctx, client, up, relay.Options{
			IdleTimeout:  idleTimeout,
			Interceptor:  vnc.NewProxy(vnc.Options{Adaptive: adaptive, Observer: obs}),
			Meter:        m,
			UpstreamName: "VNC display",
		})
		fmt.Printf("session=%s adaptive=%t updates=%d replies=%d worst-tier=%d code=%d reason=%q\n",
			r.URL.Query().Get("session"), adaptive, obs.updates.Load(), obs.replies.Load(), obs.tier.Load(), end.Code, end.Reason)
	})
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: handshakeTimeout}
	log.Fatal(srv.Serve(ln))
}

// metrics stand in for the bridge's: byte counters and the VNC histograms.
type metrics struct {
	toVM, toClient prometheus.Counter
	latency, reply prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		toVM:     prometheus.NewCounter(prometheus.CounterOpts{Name: "to_vm_bytes_total"}),
		toClient: prometheus.NewCounter(prometheus.CounterOpts{Name: "to_client_bytes_total"}),
		latency:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "request_to_update_seconds"}),
		reply:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reply_seconds"}),
	}
}

// ClientToUpstream implements relay.Meter.
func (m *metrics) ClientToUpstream(n int) { m.toVM.Add(float64(n)) }

// UpstreamToClient implements relay.Meter.
func (m *metrics) UpstreamToClient(n int) { m.toClient.Add(float64(n)) }

// observer is one session's vnc.Observer: the histograms, and counts for
// the session line.
type observer struct {
	m                *metrics
	updates, replies atomic.Int64
	tier             atomic.Int32
}

func (o *observer) Update(d time.Duration) {
	o.m.latency.Observe(d.Seconds())
	o.updates.Add(1)
}

func (o *observer) Reply(d time.Duration) {
	o.m.reply.Observe(d.Seconds())
	o.replies.Add(1)
}

// Tier records the highest tier (the worst) the session reached.
func (o *observer) Tier(t vnc.Tier) {
	for {
		old := o.tier.Load()
		if int32(t) <= old || o.tier.CompareAndSwap(old, int32(t)) {
			return
		}
	}
}

// profile starts a CPU profile into file; stop ends and writes it.
func profile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
