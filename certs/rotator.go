package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
)

// Defaults for Options.
const (
	DefaultSecretName      = "virtstation-webhook-certs"
	DefaultServiceName     = "virtstation-webhook"
	DefaultClusterDomain   = "cluster.local"
	DefaultCAValidity      = 365 * 24 * time.Hour
	DefaultServingValidity = 90 * 24 * time.Hour
	// DefaultOverlap is long enough for every API server to reload the
	// webhook configurations and every replica to reload its files, and for
	// a replica cut off from the API server for a while to catch up.
	DefaultOverlap = 24 * time.Hour
)

// Loop timing.
const (
	// resyncPeriod bounds how long the leader goes without re-reading the
	// Secret and the configurations when no watch event arrives.
	resyncPeriod = 10 * time.Minute
	// minDelay keeps a clock at a deadline's edge from spinning the loop.
	minDelay = 50 * time.Millisecond
	// The leader retries failed API calls with exponential back-off in this
	// range: conflicts clear at once, an outage should not flood the logs.
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
	// bootstrapTimeout bounds Bootstrap's read of the Secret: the process
	// must start serving (a placeholder if need be) even when the API server
	// is slow.
	bootstrapTimeout = 10 * time.Second
	// maxSteps bounds the apply-and-replan loop of one reconcile; a full
	// first start takes three (create, patch bundles, settle).
	maxSteps = 8
)

// fieldManager names this package's writes in managedFields.
const fieldManager = "virtstation-certs"

// Options configures a Rotator.
type Options struct {
	// Namespace is the install namespace: the Secret and the Service live
	// there. Required.
	Namespace string
	// SecretName holds the CA and the serving certificate
	// (DefaultSecretName).
	SecretName string
	// ServiceName is the webhook Service; the serving certificate is valid
	// for its in-cluster DNS names (DefaultServiceName).
	ServiceName string
	// ClusterDomain completes the longest DNS name (DefaultClusterDomain).
	ClusterDomain string
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations
	// are the configurations whose webhooks all get the caBundle. A
	// configuration that does not exist is skipped.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// CertDir receives tls.crt and tls.key on every replica. Required.
	CertDir string
	// CAValidity is the lifetime of a CA (DefaultCAValidity). A rotation
	// starts at two thirds of it.
	CAValidity time.Duration
	// ServingValidity is the lifetime of a serving certificate
	// (DefaultServingValidity); it is renewed at two thirds of it.
	ServingValidity time.Duration
	// Overlap is how long a new CA is trusted before it issues, and how
	// long the old one stays trusted after (DefaultOverlap). Three overlaps
	// must fit in half the CA validity.
	Overlap time.Duration
	// Elected is closed when this replica becomes the leader, as
	// manager.Elected() is. Only the leader writes the Secret and the
	// bundles. Nil means always the leader.
	Elected <-chan struct{}
	// Recorder receives an Event on the Secret for every rotation step;
	// nil records none.
	Recorder events.EventRecorder
	// Logger receives the same steps and the errors.
	Logger logr.Logger
}

// withDefaults fills in the zero fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	set := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&o.SecretName, DefaultSecretName)
	set(&o.ServiceName, DefaultServiceName)
	set(&o.ClusterDomain, DefaultClusterDomain)
	setD(&o.CAValidity, DefaultCAValidity)
	setD(&o.ServingValidity, DefaultServingValidity)
	setD(&o.Overlap, DefaultOverlap)
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("cert dir is required"))
	}
	if o.CAValidity < 0 || o.ServingValidity < 0 || o.Overlap < 0 {
		errs = append(errs, errors.New("validities and overlap must be positive"))
	}
	if 3*o.Overlap > o.CAValidity/2 {
		errs = append(errs, fmt.Errorf("overlap %s is too long for CA validity %s: three overlaps must fit in half of it", o.Overlap, o.CAValidity))
	}
	return o, errors.Join(errs...)
}

// DNSNames are the names a client may use for service in namespace:
// <svc>, <svc>.<ns>, <svc>.<ns>.svc (the name the API server verifies) and
// <svc>.<ns>.svc.<clusterDomain>.
func DNSNames(service, namespace, clusterDomain string) []string {
	svc := service + "." + namespace + ".svc"
	return []string{service, service + "." + namespace, svc, svc + "." + clusterDomain}
}

// Rotator provisions and rotates the webhook's CA and serving certificate.
// It is a controller-runtime Runnable that runs on every replica
// (NeedLeaderElection is false):
//
//   - every replica watches the Secret and writes its serving pair into
//     CertDir, where the webhook server's certwatcher reloads it;
//   - the leader (once Elected is closed) also keeps the Secret and the
//     webhook configurations' caBundle as plan decides.
//
// Call Bootstrap before the webhook server starts, so CertDir holds a pair.
// Start runs one goroutine of its own plus the informers; ReadyCheck may be
// called from any goroutine.
type Rotator struct {
	client   kubernetes.Interface
	opts     Options
	policy   policy
	log      logr.Logger
	kick     chan struct{}
	fromSync atomic.Bool // CertDir holds the Secret's pair
}

// New returns a Rotator that talks to the API server through client.
func New(client kubernetes.Interface, opts Options) (*Rotator, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("certificate rotator options: %w", err)
	}
	return &Rotator{
		client: client,
		opts:   o,
		policy: policy{dnsNames: DNSNames(o.ServiceName, o.Namespace, o.ClusterDomain), overlap: o.Overlap},
		log:    o.Logger.WithValues("secret", o.Namespace+"/"+o.SecretName),
		kick:   make(chan struct{}, 1),
	}, nil
}

// NeedLeaderElection is false: every replica must write its own files. The
// leader-only work waits for Options.Elected.
func (r *Rotator) NeedLeaderElection() bool { return false }

// ReadyCheck is a healthz.Checker: it fails until CertDir holds the serving
// certificate from the Secret, so that a replica is not sent admission
// requests while it serves a placeholder nobody trusts.
func (r *Rotator) ReadyCheck(_ *http.Request) error {
	if !r.fromSync.Load() {
		return fmt.Errorf("serving certificate not yet written from Secret %s/%s", r.opts.Namespace, r.opts.SecretName)
	}
	return nil
}

// Bootstrap makes sure CertDir holds a key pair before the webhook server
// starts (it refuses to start without one). It writes the Secret's pair if
// the Secret can be read and has one; otherwise it keeps a pair already in
// CertDir, or writes a self-signed placeholder that Start replaces once the
// leader has filled the Secret. It fails only when CertDir is not writable.
func (r *Rotator) Bootstrap(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	sec, err := r.client.CoreV1().Secrets(r.opts.Namespace).Get(ctx, r.opts.SecretName, metav1.GetOptions{})
	switch {
	case err == nil:
		if err := r.syncFiles(sec); err != nil {
			return err
		}
		if r.fromSync.Load() {
			return nil
		}
	case apierrors.IsNotFound(err):
		r.log.Info("certificate Secret does not exist yet; the leader creates it")
	default:
		r.log.Error(err, "read certificate Secret; serving a placeholder until it can be read")
	}
	if _, err := readPair(r.opts.CertDir); err == nil {
		return nil
	}
	ca, err := newCA(time.Now(), r.opts.ServingValidity, r.opts.ServiceName+"-placeholder")
	if err != nil {
		return err
	}
	kp, err := issueServing(ca, time.Now(), r.opts.ServingValidity, r.policy.dnsNames)
	if err != nil {
		return err
	}
	r.log.Info("serving a placeholder certificate until the Secret holds one", "certDir", r.opts.CertDir)
	return writePair(r.opts.CertDir, kp.certPEM, kp.keyPEM)
}

// Start runs until ctx ends: it watches the Secret (and, once leader, the
// webhook configurations), writes CertDir on every change, and as leader
// reconciles at every event and at every deadline plan returns.
func (r *Rotator) Start(ctx context.Context) error {
	secrets, stopSecrets, err := r.watchSecret(ctx)
	if err != nil {
		return err
	}
	defer stopSecrets()

	elected := r.opts.Elected
	if elected == nil {
		ch := make(chan struct{})
		close(ch)
		elected = ch
	}
	leader := false
	stopConfigs := func() {}
	defer func() { stopConfigs() }()
	retry := retryMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var wake time.Time
		var failed error
		if leader {
			if wake, failed = r.reconcile(ctx); failed != nil && ctx.Err() == nil {
				r.log.Error(failed, "reconcile certificates")
			}
		}
		sec, err := secrets.Secrets(r.opts.Namespace).Get(r.opts.SecretName)
		if err != nil && !apierrors.IsNotFound(err) {
			failed = errors.Join(failed, err)
		} else if err == nil {
			if err := r.syncFiles(sec); err != nil {
				r.log.Error(err, "write serving certificate", "certDir", r.opts.CertDir)
				failed = errors.Join(failed, err)
			}
		}

		delay := resyncPeriod
		if !wake.IsZero() {
			delay = min(delay, time.Until(wake))
		}
		if failed != nil {
			delay = min(delay, retry)
			retry = min(2*retry, retryMax)
		} else {
			retry = retryMin
		}
		timer.Reset(max(delay, minDelay))

		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-timer.C:
		case <-elected:
			elected = nil
			leader = true
			r.log.Info("leader: maintaining the certificate Secret and the caBundles")
			stop, err := r.watchConfigs(ctx)
			if err != nil {
				return err
			}
			stopConfigs = stop
		}
	}
}

// syncFiles writes the Secret's serving pair into CertDir when it differs.
// A Secret without a usable pair (the leader has not filled it yet) leaves
// CertDir alone.
func (r *Rotator) syncFiles(sec *corev1.Secret) error {
	crt, key := sec.Data[SecretKeyServingCert], sec.Data[SecretKeyServingKey]
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		r.log.V(1).Info("Secret holds no usable serving pair yet", "reason", err.Error())
		return nil
	}
	if pairOnDisk(r.opts.CertDir, crt, key) {
		r.fromSync.Store(true)
		return nil
	}
	if err := writePair(r.opts.CertDir, crt, key); err != nil {
		return err
	}
	r.fromSync.Store(true)
	if c, err := parseCertificate(crt); err == nil {
		r.log.Info("wrote serving certificate", "certDir", r.opts.CertDir, "serial", c.SerialNumber.Text(16),
			"issuer", c.Issuer.CommonName, "notAfter", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// wake asks the loop to run again; it never blocks.
func (r *Rotator) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// kickOnChange turns every informer event into a wake-up.
func (r *Rotator) kickOnChange() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.wake() },
		UpdateFunc: func(any, any) { r.wake() },
		DeleteFunc: func(any) { r.wake() },
	}
}

// byName restricts a list or watch to one object, which RBAC can then
// authorize with resourceNames.
func byName(name string) informers.SharedInformerOption {
	return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
}

// watchSecret starts an informer on the one Secret and waits for its sync.
func (r *Rotator) watchSecret(ctx context.Context) (corev1listers.SecretLister, func(), error) {
	f := informers.NewSharedInformerFactoryWithOptions(r.client, 0, informers.WithNamespace(r.opts.Namespace), byName(r.opts.SecretName))
	inf := f.Core().V1().Secrets()
	if _, err := inf.Informer().AddEventHandler(r.kickOnChange()); err != nil {
		return nil, nil, fmt.Errorf("watch certificate Secret: %w", err)
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			f.Shutdown()
			return nil, nil, fmt.Errorf("sync %v informer for the certificate Secret", typ)
		}
	}
	return inf.Lister(), f.Shutdown, nil
}

// watchConfigs starts one informer per webhook configuration, so that a
// cleared or edited caBundle is repaired at once. The leader reads the
// objects themselves with GET; the informers only wake it.
func (r *Rotator) watchConfigs(ctx context.Context) (func(), error) {
	var factories []informers.SharedInformerFactory
	stop := func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}
	add := func(name string, informer func(informers.SharedInformerFactory) toolscache.SharedIndexInformer) error {
		f := informers.NewSharedInformerFactoryWithOptions(r.client, 0, byName(name))
		if _, err := informer(f).AddEventHandler(r.kickOnChange()); err != nil {
			return fmt.Errorf("watch webhook configuration %s: %w", name, err)
		}
		factories = append(factories, f)
		f.Start(ctx.Done())
		return nil
	}
	for _, name := range r.opts.MutatingWebhookConfigurations {
		if err := add(name, func(f informers.SharedInformerFactory) toolscache.SharedIndexInformer {
			return f.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		}); err != nil {
			stop()
			return nil, err
		}
	}
	for _, name := range r.opts.ValidatingWebhookConfigurations {
		if err := add(name, func(f informers.SharedInformerFactory) toolscache.SharedIndexInformer {
			return f.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
		}); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}
