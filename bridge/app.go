package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/bridge/sshbridge"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// Client rate limits of the bridge's API client.
const (
	clientQPS   = 50
	clientBurst = 100
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
	Options       Options
	Log           logr.Logger
	Registerer    prometheus.Registerer
	Gatherer      prometheus.Gatherer
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
	// Every open session renews its Lease a few times a Lease duration; the
	// client-go default of 5 requests/s would queue renewals behind a burst
	// of new sessions until the Leases expire.
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
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
	reg, err := session.New(kube, c.Namespace, c.Replica, session.Options{LeaseDuration: c.LeaseDuration})
	if err != nil {
		return nil, err
	}
	if err := reg.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the session registry: %w", err)
	}
	return New(ctx, c.Options, Deps{
		Kube:       kube,
		Reader:     reader,
		Upstream:   dialer,
		Sessions:   reg,
		HostKeys:   sshbridge.NewConfigMapStore(kube, c.Namespace),
		Log:        c.Log,
		Registerer: c.Registerer,
		Gatherer:   c.Gatherer,
	})
}
