package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/virtstation/virtstation/webhooks/mutate"
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

// Setup registers the webhooks, their cache indexes, the reconcilers and the
// health checks on mgr.
func Setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kubevirtv1.VirtualMachine{}, mutate.IndexMAC, mutate.MACIndexer); err != nil {
		return fmt.Errorf("index virtual machines by mac: %w", err)
	}
	srv := mgr.GetWebhookServer()
	srv.Register(mutate.Path, &webhook.Admission{Handler: mutate.NewHandler(mutate.CacheCluster{Reader: mgr.GetCache()})})

	reporter := &mutate.Reporter{Reader: mgr.GetCache(), Recorder: mgr.GetEventRecorder("virtstation-webhook")}
	if err := reporter.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up injection reporter: %w", err)
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-server", srv.StartedChecker()); err != nil {
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
