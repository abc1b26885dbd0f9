package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
)

// slowLoop takes seconds on any input: four million products, none of them
// negative.
const slowLoop = `
	some i in numbers.range(1, 2000)
	some j in numbers.range(1, 2000)
	i * j < 0
`

// TestSlowPolicyRefusedAtApply: a valid policy that is slow on the shipped
// sample inputs is refused by the API server at apply time, naming the
// module, the budget and the fix.
func TestSlowPolicyRefusedAtApply(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "slow-policy", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data: map[string]string{"slow.rego": "package virtstation.rules.slow\n\n" +
			"deny contains {\"id\": \"slow\", \"field\": \"metadata\", \"message\": \"never\"} if {" + slowLoop + "}\n"},
	}
	start := time.Now()
	err := env.Client.Create(context.Background(), cm)
	took := time.Since(start)
	if err == nil {
		_ = env.Client.Delete(context.Background(), cm)
		t.Fatal("slow policy admitted")
	}
	t.Logf("refusal after %s: %v", took, err)
	if apierrors.IsInternalError(err) || apierrors.IsTimeout(err) {
		t.Fatalf("refusal is a 500 or timeout: %v", err)
	}
	for _, w := range []string{"data[slow.rego]", "module slow.rego", "100ms budget", "sample input", "fix: make slow.rego faster"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q lacks %q", err, w)
		}
	}
	if took > 5*time.Second {
		t.Errorf("the refusal took %s; the webhook's timeout is 10 s", took)
	}
}

// TestSlowPolicyDeniesAtRunTime: a policy fast on the samples but slow on
// a VM with a particular annotation is loaded; that VM is then denied
// naming the module and its ConfigMap (not a 500), with an Event on the
// ConfigMap and the metric; other VMs are admitted.
func TestSlowPolicyDeniesAtRunTime(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "deadline")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "audit-policy", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data: map[string]string{"audit.rego": "package virtstation.rules.audit\n\n" +
			"deny contains {\"id\": \"audit\", \"field\": \"metadata\", \"message\": \"never\"} if {\n" +
			"\tinput.object.metadata.annotations[\"example.com/audit\"] == \"deep\"" + slowLoop + "}\n"},
	}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatalf("policy fast on the samples refused: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
	before := deadlineMetric(t, "audit.rego")

	var denial error
	eventually(t, 30*time.Second, func() error {
		vm := newVM(ns, fmt.Sprintf("deep-%d", time.Now().UnixNano()), managed, withAnnotation("example.com/audit", "deep"))
		err := env.Client.Create(ctx, vm)
		if err == nil {
			_ = env.Client.Delete(ctx, vm)
			return fmt.Errorf("admitted: the policy is not loaded yet")
		}
		denial = err
		return nil
	})
	t.Logf("denial: %v", denial)
	if apierrors.IsInternalError(denial) || apierrors.IsTimeout(denial) {
		t.Fatalf("denial is a 500 or timeout: %v", denial)
	}
	if !apierrors.IsForbidden(denial) {
		t.Errorf("denial is not a 403: %v", denial)
	}
	for _, w := range []string{"policy module audit.rego", "ConfigMap virtstation-system/audit-policy", "1s deadline", "rule: policy-deadline", "fix:"} {
		if !strings.Contains(denial.Error(), w) {
			t.Errorf("denial %q lacks %q", denial, w)
		}
	}
	waitForEvent(t, testenv.InstallNamespace, "ConfigMap", "audit-policy", "PolicyDeadlineExceeded", "of VM "+ns+"/deep-", "audit.rego")
	if after := deadlineMetric(t, "audit.rego"); after < before+1 {
		t.Errorf("virtstation_policy_eval_deadline_exceeded_total{module=audit.rego} went from %v to %v", before, after)
	}
	if err := env.Client.Create(ctx, newVM(ns, "shallow", managed)); err != nil {
		t.Errorf("a VM without the annotation: %v", err)
	}
}

// deadlineMetric reads the deadline counter for module from the process's
// metrics registry, where the webhook manager registers it.
func deadlineMetric(t *testing.T, module string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "virtstation_policy_eval_deadline_exceeded_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "module") == module {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
