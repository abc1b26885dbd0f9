package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/disks"
	"github.com/virtstation/virtstation/lifecycle"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/userdata"
	"github.com/virtstation/virtstation/webhooks/audit"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/mutate/report"
	"github.com/virtstation/virtstation/webhooks/provenance"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// cacheSyncProbeTimeout bounds how long /readyz waits on informer sync; a
// probe must answer well inside the kubelet's probe timeout (1 s default).
const cacheSyncProbeTimeout = 500 * time.Millisecond

// NewScheme returns the scheme with every type the webhooks read.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	utilruntime.Must(cdiv1beta1.AddToScheme(s))
	return s
}

// policyEvalTimeout bounds one Rego evaluation, well below the webhook's
// 5 s timeout so a slow policy is a clear denial naming the module (found by
// a profiled re-run of at most 0.2 s), not an API server timeout. It is ten
// times validate.PolicyBudget, which every policy ConfigMap must meet on the
// sample inputs when applied.
const policyEvalTimeout = time.Second

// Options configures Setup.
type Options struct {
	// Namespace is the install namespace: policy ConfigMaps live there.
	Namespace string
	// ClaimGrace is how long a disk claim holds before its VM exists; a
	// claim by a VM that never appears is released after it.
	ClaimGrace time.Duration
	// AuditInterval is how often the policy audit audits each namespace
	// again; 0 means audit.DefaultInterval.
	AuditInterval time.Duration
	// NoPolicyReports: the audit writes no wgpolicyk8s.io PolicyReports
	// (its metrics and Events stay).
	NoPolicyReports bool
	// OpenReports: the audit also writes openreports.io Reports.
	OpenReports bool
	// NoAudit: no policy audit runs (benchmarks run their own).
	NoAudit bool
}

// Setup registers the webhooks, their cache indexes and informers, the
// reconcilers and the health checks on mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kubevirtv1.VirtualMachine{}, mutate.IndexMAC, mutate.MACIndexer); err != nil {
		return fmt.Errorf("index virtual machines by mac: %w", err)
	}
	apis, err := startInformers(ctx, mgr)
	if err != nil {
		return err
	}
	p := policies{engine: validate.NewEngine(policyEvalTimeout), modes: &atomic.Pointer[policy.Modes]{}, metrics: validate.DefaultMetrics()}
	cluster := newCacheCluster(mgr, opts, apis)
	// The lifecycle controller's user: its requests alone change the
	// annotations it writes on VMs.
	identity, err := whoAmI(ctx, mgr.GetConfig())
	if err != nil {
		return err
	}
	snaps := validate.Snapshotter{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), NoDataVolumes: !apis.dataVolumes, Grace: opts.ClaimGrace}
	registerWebhooks(mgr, opts, cluster, identity, p, snaps)
	if err := setupReconcilers(ctx, mgr, opts, apis, identity, p, snaps); err != nil {
		return err
	}
	return addChecks(mgr, p.engine)
}

// servedAPIs says which of the APIs the webhooks can do without the
// cluster serves.
type servedAPIs struct {
	// dataVolumes: CDI's DataVolume; without it data disks are bare PVCs.
	dataVolumes bool
	// kubeVirt: the KubeVirt CR, whose default architecture VMs that name
	// none run on; without it they are taken to run on amd64.
	kubeVirt bool
}

// startInformers starts the informers the webhooks read through the cache,
// on the optional APIs the cluster serves, and says which those are.
func startInformers(ctx context.Context, mgr ctrl.Manager) (servedAPIs, error) {
	var apis servedAPIs
	var err error
	if apis.dataVolumes, err = hasDataVolumes(mgr); err != nil {
		return apis, err
	}
	informers := []client.Object{&kubevirtv1.VirtualMachineInstance{}, &corev1.PersistentVolumeClaim{}, &corev1.Secret{}}
	if apis.dataVolumes {
		informers = append(informers, &cdiv1beta1.DataVolume{})
	} else {
		ctrl.Log.WithName("setup").Info("CDI is not installed: data disks are bare PVCs only")
	}
	if apis.kubeVirt, err = served(mgr, kubevirtv1.SchemeGroupVersion.WithKind("KubeVirt")); err != nil {
		return apis, err
	}
	if apis.kubeVirt {
		// The default architecture of VMs that name none.
		informers = append(informers, &kubevirtv1.KubeVirt{})
	} else {
		ctrl.Log.WithName("setup").Info("no KubeVirt CRD: VMs that name no architecture are taken to run on amd64")
	}
	for _, obj := range informers {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return apis, fmt.Errorf("start informer for %T: %w", obj, err)
		}
	}
	return apis, nil
}

// policies are the Rego engine, the enforcement modes and the policy
// metrics, which the validating webhooks, the policy loader and the audit
// share.
type policies struct {
	engine  *validate.Engine
	modes   *atomic.Pointer[policy.Modes]
	metrics *validate.Metrics
}

// newCacheCluster is what the mutating webhook reads of the cluster: mgr's
// cache, on the informers startInformers started.
func newCacheCluster(mgr ctrl.Manager, opts Options, apis servedAPIs) mutate.CacheCluster {
	return mutate.CacheCluster{
		Lookup: disks.Cache{Reader: mgr.GetCache(), NoDataVolumes: !apis.dataVolumes},
		Reader: mgr.GetCache(), NoKubeVirt: !apis.kubeVirt, Namespace: opts.Namespace,
	}
}

// registerWebhooks registers every admission webhook on mgr's webhook
// server. The mutating webhook lets only identity change the lifecycle
// controller's annotations.
func registerWebhooks(mgr ctrl.Manager, opts Options, cluster mutate.CacheCluster, identity string, p policies, snaps validate.Snapshotter) {
	srv := mgr.GetWebhookServer()
	// Every path answers only AdmissionReviews: anything else is a 400.
	register := func(path string, h admission.Handler) {
		srv.Register(path, RequireAdmissionReview(&webhook.Admission{Handler: h}))
	}
	register(mutate.Path, mutate.NewHandler(cluster, mutate.WithPolicyRevision(p.engine.Revision), mutate.WithController(identity)))
	register(validate.VMPath, &validate.VMHandler{
		Engine: p.engine, Modes: p.modes, Client: mgr.GetClient(), Verifier: provenance.Verifier{Reader: mgr.GetAPIReader()},
		DryRun: p.metrics.DryRunViolation, Recorder: mgr.GetEventRecorder("virtstation-policy"), Metrics: p.metrics,
		Snapshots: snaps,
	})
	register(validate.UnmanagedVMPath, &validate.UnmanagedVMHandler{Modes: p.modes, DryRun: p.metrics.DryRunViolation, Snapshots: snaps})
	register(validate.VMIPath, validate.NewVMIHandler(snaps, p.modes, p.metrics.DryRunViolation))
	register(validate.VMStatusPath, validate.NewVMStatusHandler(snaps, p.modes, p.metrics.DryRunViolation))
	register(validate.ConfigMapPath, &validate.ConfigMapValidator{Namespace: opts.Namespace, Reader: mgr.GetAPIReader()})
	register(claims.DeletionGuardPath, &claims.DeletionGuard{Reader: mgr.GetAPIReader(), Grace: opts.ClaimGrace})
}

// setupReconcilers registers the controllers: the injection reporter, the
// per-VM Secrets (user-data, SSH keys), the policy audit and loader, the
// claim releaser and the lifecycle controller, which acts as identity.
func setupReconcilers(ctx context.Context, mgr ctrl.Manager, opts Options, apis servedAPIs, identity string, p policies, snaps validate.Snapshotter) error {
	reporter := &report.Reporter{Reader: mgr.GetCache(), Recorder: mgr.GetEventRecorder("virtstation-webhook")}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up injection reporter: %w", err)
	}
	userData := &userdata.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetCache(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("virtstation-user-data"),
	}
	if err := userData.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up user-data sync: %w", err)
	}
	if err := setupPolicies(ctx, mgr, opts, apis, p, snaps); err != nil {
		return err
	}
	releaser := &claims.Releaser{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reader: mgr.GetCache(), Grace: opts.ClaimGrace, NoDataVolumes: !apis.dataVolumes}
	if err := releaser.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up claim releaser: %w", err)
	}
	sshKeys := &sshkeys.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetCache(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("virtstation-ssh-keys"),
	}
	if err := sshKeys.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up ssh key sync: %w", err)
	}
	return setupLifecycle(mgr, opts, identity)
}

// setupPolicies registers the policy audit (unless opts.NoAudit) and the
// policy loader, which tells the audit when the policies change.
func setupPolicies(ctx context.Context, mgr ctrl.Manager, opts Options, apis servedAPIs, p policies, snaps validate.Snapshotter) error {
	auditor, err := newAuditor(mgr, opts, p.engine, p.modes, snaps)
	if err != nil {
		return err
	}
	if !opts.NoAudit {
		if err := auditor.SetupWithManager(mgr, !apis.dataVolumes); err != nil {
			return fmt.Errorf("set up policy audit: %w", err)
		}
	}
	loader := &validate.PolicyLoader{
		Client: mgr.GetClient(), Reader: mgr.GetCache(), Namespace: opts.Namespace, Engine: p.engine,
		Recorder: mgr.GetEventRecorder("virtstation-policy"), Modes: p.modes, Metrics: p.metrics,
		OnChange: auditor.PolicyChanged,
	}
	if err := loader.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up policy loader: %w", err)
	}
	return nil
}

// addChecks adds the liveness check and the readiness checks: the webhook
// server has started, the policies are loaded, the informers have synced.
func addChecks(mgr ctrl.Manager, engine *validate.Engine) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-server", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("policies", engine.ReadyCheck); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncProbeTimeout)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	})
}

// newAuditor is the policy audit, writing the report kinds opts asks for
// that the cluster serves.
func newAuditor(mgr ctrl.Manager, opts Options, engine *validate.Engine, modes *atomic.Pointer[policy.Modes], snaps validate.Snapshotter) (*audit.Auditor, error) {
	var wanted []schema.GroupVersionKind
	if !opts.NoPolicyReports {
		wanted = append(wanted, policyreport.WGPolicy)
	}
	if opts.OpenReports {
		wanted = append(wanted, policyreport.OpenReports)
	}
	var kinds []schema.GroupVersionKind
	for _, gvk := range wanted {
		ok, err := served(mgr, gvk)
		if err != nil {
			return nil, err
		}
		if !ok {
			ctrl.Log.WithName("setup").Info("report CRD not installed: the policy audit writes none of these reports (install the CRD and restart)", "kind", gvk.Kind, "group", gvk.Group)
			continue
		}
		kinds = append(kinds, gvk)
	}
	return &audit.Auditor{
		Reader: mgr.GetCache(), Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Engine: engine, Modes: modes, Snapshots: snaps, Kinds: kinds,
		Recorder: mgr.GetEventRecorder("virtstation-audit"), Interval: opts.AuditInterval,
	}, nil
}

// hasDataVolumes reports whether the cluster serves CDI's DataVolume.
func hasDataVolumes(mgr ctrl.Manager) (bool, error) {
	return served(mgr, cdiv1beta1.SchemeGroupVersion.WithKind("DataVolume"))
}

// served reports whether the cluster serves a kind.
func served(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", gvk.Kind, err)
	}
	return true, nil
}

// setupLifecycle registers the idle-stop controller (package lifecycle),
// which stops VMs as identity, the controller's own user, named in its
// records.
func setupLifecycle(mgr ctrl.Manager, opts Options, identity string) error {
	kv, err := lifecycle.NewSubresources(mgr.GetConfig())
	if err != nil {
		return err
	}
	c := &lifecycle.Controller{
		Client: mgr.GetClient(), Reader: mgr.GetCache(), APIReader: mgr.GetAPIReader(), KubeVirt: kv,
		Recorder: mgr.GetEventRecorder("virtstation-lifecycle"), Namespace: opts.Namespace,
		Identity: identity,
	}
	if err := c.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up lifecycle controller: %w", err)
	}
	return nil
}

// whoAmITries and whoAmIInterval bound how long start-up waits for the API
// server to say who the webhook is: the mutating webhook lets only that user
// change the lifecycle controller's annotations, so a guessed name would
// undo every write of the controller. Failing start-up (the pod restarts)
// is better.
const (
	whoAmITries    = 5
	whoAmIInterval = 2 * time.Second
)

// whoAmI is the user cfg authenticates as, from a SelfSubjectReview (GA
// since Kubernetes 1.28), tried whoAmITries times.
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("who am I: %w", err)
	}
	for i := 1; ; i++ {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil && r.Status.UserInfo.Username != "" {
			return r.Status.UserInfo.Username, nil
		}
		if err == nil {
			err = errors.New("no username in the SelfSubjectReview")
		}
		if i == whoAmITries {
			return "", fmt.Errorf("who am I (SelfSubjectReview): %w", err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("who am I: %w", ctx.Err())
		case <-time.After(whoAmIInterval):
		}
	}
}
