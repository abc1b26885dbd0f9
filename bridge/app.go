package bridge

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/activity"
	"github.com/virtstation/virtstation/bridge/janitor"
	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/sshbridge"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// Client rate limits of the session registry's background client.
const (
	// backgroundQPS and backgroundBurst limit the session registry's
	// heartbeat and Lease releases: one write every few seconds, and after
	// a mass close one write per ended session. 2,000 sessions closing at
	// once are released within about 10 s, sooner than the Lease duration
	// would free them; the registry sends at most a handful at a time.
	backgroundQPS   = 200
	backgroundBurst = 200
)

// Config is what a bridge process is told: where it runs and its policy.
type Config struct {
	// Namespace is the bridge's own namespace: session Leases and SSH
	// host-key pins live there.
	Namespace string
	// Replica names this process among the bridge's replicas (its pod name).
	Replica string
	// LeaseDuration is how long a crashed replica's sessions stay held;
	// zero takes session.DefaultLeaseDuration.
	LeaseDuration time.Duration
	// SweepEvery is how often the janitor deletes what deleted VMs and
	// gone replicas left behind; zero takes janitor.DefaultEvery.
	SweepEvery time.Duration
	// APIQPS and APIBurst limit, on the client side, the requests that
	// open sessions (TokenReview, SubjectAccessReview, VM and VMI reads,
	// the Lease, the upstream dial). APIQPS <= 0, the default, sets no
	// limit: the API server's Priority and Fairness paces the bridge, as
	// SIG API Machinery recommends and controller-runtime does since v0.21.
	// A client-side limit makes a mass reconnect queue in the bridge: at
	// 50 requests a second, 2,000 sessions took 121 s to open.
	APIQPS     float32
	APIBurst   int
	Options    Options
	Log        logr.Logger
	Registerer prometheus.Registerer
}

// NewScheme knows the objects the bridge reads: VMs and VMIs.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(s); err != nil {
		panic(err) // static registration; cannot fail at run time
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// NewFromConfig wires a Server to the cluster cfg reaches, as the bridge's
// ServiceAccount: it starts the session registry (ended with ctx) and
// returns once the registry watches its Leases.
func NewFromConfig(ctx context.Context, cfg *rest.Config, c Config) (*Server, error) {
	cfg = rest.CopyConfig(cfg)
	// The session registry's heartbeat, which keeps every session of the
	// replica, and its queued releases get a client and a rate limiter of
	// their own: a burst of acquires cannot hold the heartbeat up past the
	// Lease duration, and a mass close drains without slowing new sessions.
	bg := rest.CopyConfig(cfg)
	bg.QPS, bg.Burst = backgroundQPS, backgroundBurst
	background, err := kubernetes.NewForConfig(bg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	recorder, err := newRecorder(ctx, bg, &c)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = apiLimits(c.APIQPS, c.APIBurst)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("kubevirt client: %w", err)
	}
	dialer, err := upstream.NewDialer(cfg)
	if err != nil {
		return nil, err
	}
	reg, err := session.New(kube, c.Namespace, c.Replica, session.Options{LeaseDuration: c.LeaseDuration, BackgroundClient: background})
	if err != nil {
		return nil, err
	}
	if err := reg.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the session registry: %w", err)
	}
	// The janitor deletes the Leases and host-key pins of VMs that no
	// longer exist, and the heartbeats of replicas long gone; it uses the
	// background client, so a sweep never delays a session's requests.
	go (&janitor.Janitor{
		Kube: background, Namespace: c.Namespace, VMs: reader, Every: c.SweepEvery,
		Log: c.Log.WithName("janitor"),
	}).Start(ctx)
	return New(ctx, c.Options, Deps{
		Kube:       kube,
		Reader:     reader,
		Upstream:   dialer,
		Sessions:   reg,
		HostKeys:   sshbridge.NewConfigMapStore(kube, c.Namespace),
		Log:        c.Log,
		Registerer: c.Registerer,
		Activity:   recorder,
	})
}

// newRecorder starts the activity Recorder (ended with ctx), which
// writes the VMs' activity Leases in c.Namespace with a client of its
// own: its workers bound it to a few requests in flight, and it never
// waits behind the heartbeat's or the sessions' rate limits, nor they
// behind it. c.Registerer, when nil, becomes a private registry that New
// shares.
func newRecorder(ctx context.Context, cfg *rest.Config, c *Config) (*activity.Recorder, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = apiLimits(0, 0)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	rec := activity.New(kube.CoordinationV1(), c.Namespace, activity.Options{
		Interval: c.Options.ActivityInterval,
		Count:    activityWrites(c.Registerer),
		Log:      c.Log.WithName("activity"),
	})
	go rec.Run(ctx)
	return rec, nil
}

// apiLimits are the rest.Config QPS and Burst for the limits asked for: a
// QPS of -1 turns client-go's limiter off (its zero would mean 5 a second),
// and a burst below the QPS is raised to it.
func apiLimits(qps float32, burst int) (float32, int) {
	if qps <= 0 {
		return -1, 0
	}
	return qps, max(burst, int(math.Ceil(float64(qps))))
}
