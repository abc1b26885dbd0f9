package admission_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/internal/testenv"
)

// The no-op webhook pair is the floor any webhook design pays on this
// control plane: a mutating and a validating webhook on the same
// controller-runtime server, TLS and HTTP/2 stack as Virtstation's, whose
// handlers allow every request and change nothing. What the labelled
// variant costs beyond it is Virtstation's own work.
const (
	noopName         = "virtstation-bench-noop"
	noopMutatePath   = "/bench-noop-mutate"
	noopValidatePath = "/bench-noop-validate"
)

// registerNoop registers the handlers once per process: the webhook server
// refuses a path twice.
var registerNoop sync.Once

// allowAll is the no-op handlers' whole logic.
var allowAll = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
})

// installNoop registers the no-op handlers on the environment's webhook
// server and configures the API server to call them, mutating then
// validating, for VMs labelled peerLabel=noop, as the shipped
// configurations do for managed VMs. It waits until the API server calls
// them.
func installNoop(ctx context.Context, e *testenv.Env, c client.Client, ns string) error {
	registerNoop.Do(func() {
		srv := e.Manager.GetWebhookServer()
		srv.Register(noopMutatePath, &webhook.Admission{Handler: allowAll})
		srv.Register(noopValidatePath, &webhook.Admission{Handler: allowAll})
	})
	rule := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"}, Resources: []string{"virtualmachines"}},
	}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{peerLabel: "noop"}}
	none := admissionregistrationv1.SideEffectClassNone
	mURL, ca := e.WebhookURL(noopMutatePath)
	vURL, _ := e.WebhookURL(noopValidatePath)
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: noopName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "vm.mutate.noop.bench.virtstation.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &mURL, CABundle: ca},
			Rules:                   rule,
			ObjectSelector:          selector,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: noopName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vm.validate.noop.bench.virtstation.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &vURL, CABundle: ca},
			Rules:                   rule,
			ObjectSelector:          selector,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T: %w", obj, err)
		}
	}
	// The API server picks configurations up through an informer: wait
	// until a dry-run create reaches both handlers.
	before, err := handlerTimes()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(peerReadyTimeout)
	for {
		if err := c.Create(ctx, newVM(full, noopPeer, ns, 0), client.DryRunAll); err != nil {
			return fmt.Errorf("dry-run create through the no-op webhooks: %w", err)
		}
		after, err := handlerTimes()
		if err != nil {
			return err
		}
		if after[noopMutatePath].Count > before[noopMutatePath].Count && after[noopValidatePath].Count > before[noopValidatePath].Count {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not call the no-op webhooks after %s", peerReadyTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
