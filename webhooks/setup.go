package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/webhooks/mutate"
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

// Secret sweeping: a Secret written for an admission that was then rejected
// gets orphanGrace to see its VM appear before it is deleted.
const (
	orphanGrace = 10 * time.Minute
	sweepEvery  = 5 * time.Minute
)

// policyEvalTimeout bounds one Rego evaluation, well below the webhook's
// 5 s timeout so a slow policy is a clear error, not an API server timeout.
const policyEvalTimeout = time.Second

// Options configures Setup.
type Options struct {
	// Namespace is the install namespace: policy ConfigMaps live there.
	Namespace string
	// ClaimGrace is how long a disk claim holds before its VM exists; a
	// claim by a VM that never appears is released after it.
	ClaimGrace time.Duration
}

// Setup registers the webhooks, their cache indexes and informers, the
// reconcilers and the health checks on mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kubevirtv1.VirtualMachine{}, mutate.IndexMAC, mutate.MACIndexer); err != nil {
		return fmt.Errorf("index virtual machines by mac: %w", err)
	}
	cdi, err := hasDataVolumes(mgr)
	if err != nil {
		return err
	}
	informers := []client.Object{&kubevirtv1.VirtualMachineInstance{}, &corev1.PersistentVolumeClaim{}, &corev1.Secret{}}
	if cdi {
		informers = append(informers, &cdiv1beta1.DataVolume{})
	} else {
		ctrl.Log.WithName("setup").Info("CDI is not installed: data disks are bare PVCs only")
	}
	for _, obj := range informers {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("start informer for %T: %w", obj, err)
		}
	}

	engine := validate.NewEngine(policyEvalTimeout)
	modes := &atomic.Pointer[validate.Modes]{}
	policyMetrics := validate.DefaultMetrics()

	cluster := mutate.CacheCluster{
		Reader: mgr.GetCache(), APIReader: mgr.GetAPIReader(), NoDataVolumes: !cdi,
		CollectKeys: func(s []corev1.Secret) []string { keys, _ := sshkeys.Collect(s); return keys },
	}
	srv := mgr.GetWebhookServer()
	srv.Register(mutate.Path, &webhook.Admission{Handler: mutate.NewHandler(cluster,
		mutate.WithSecretWriter(mutate.ClientSecretWriter{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}),
		mutate.WithPolicyRevision(engine.Revision))})
	srv.Register(validate.VMPath, &webhook.Admission{Handler: &validate.VMHandler{
		Engine: engine, Modes: modes, Client: mgr.GetClient(), DryRun: policyMetrics.DryRunViolation,
		Snapshots: validate.Snapshotter{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), NoDataVolumes: !cdi, Grace: opts.ClaimGrace},
	}})
	srv.Register(validate.UnmanagedVMPath, &webhook.Admission{Handler: &validate.UnmanagedVMHandler{
		Modes: modes, DryRun: policyMetrics.DryRunViolation,
		Snapshots: validate.Snapshotter{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), NoDataVolumes: !cdi, Grace: opts.ClaimGrace},
	}})
	srv.Register(validate.ConfigMapPath, &webhook.Admission{Handler: &validate.ConfigMapValidator{Namespace: opts.Namespace, Reader: mgr.GetAPIReader()}})
	srv.Register(claims.DeletionGuardPath, &webhook.Admission{Handler: &claims.DeletionGuard{Reader: mgr.GetAPIReader(), Grace: opts.ClaimGrace}})

	recorder := mgr.GetEventRecorder("virtstation-webhook")
	reporter := &mutate.Reporter{Reader: mgr.GetCache(), Recorder: recorder}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up injection reporter: %w", err)
	}
	adopter := &mutate.Adopter{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := adopter.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up secret adopter: %w", err)
	}
	loader := &validate.PolicyLoader{
		Client: mgr.GetClient(), Reader: mgr.GetCache(), Namespace: opts.Namespace, Engine: engine,
		Recorder: mgr.GetEventRecorder("virtstation-policy"), Modes: modes, Metrics: policyMetrics,
	}
	if err := loader.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up policy loader: %w", err)
	}
	releaser := &claims.Releaser{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reader: mgr.GetCache(), Grace: opts.ClaimGrace, NoDataVolumes: !cdi}
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
	if err := mgr.Add(&mutate.Sweeper{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Suffixes: []string{mutate.UserDataSecretName(""), sshkeys.SecretName("")},
		Grace:    orphanGrace, Every: sweepEvery,
	}); err != nil {
		return fmt.Errorf("add secret sweeper: %w", err)
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-server", srv.StartedChecker()); err != nil {
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

// hasDataVolumes reports whether the cluster serves CDI's DataVolume.
func hasDataVolumes(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: cdiv1beta1.SchemeGroupVersion.Group, Kind: "DataVolume"}, cdiv1beta1.SchemeGroupVersion.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up DataVolume: %w", err)
	}
	return true, nil
}
