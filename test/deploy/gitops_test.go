package deploy

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/wait"
)

// gitopsManager is the field manager the GitOps round trips apply as.
const gitopsManager = "gitops-controller"

// injectorManager writes the webhooks' caBundle, as cert-manager's CA
// injector (or the webhook itself, with certManager.enabled=false) does.
const injectorManager = "cert-manager-cainjector"

// TestGitOpsRoundTrip applies the rendered chart as Argo CD (with
// ServerSideApply=true) and Flux do, through the real API server, and
// checks what docs/gitops.md promises: a second apply of the same
// manifests changes no object (every resourceVersion stays), also after
// the CA injector wrote the webhooks' caBundle, which the chart does not
// render and so never takes back; and a server-side dry-run apply then
// returns exactly the live objects (`kubectl diff --server-side` is empty),
// so nothing shows as drift.
func TestGitOpsRoundTrip(t *testing.T) {
	cases := map[string]struct {
		release, namespace string
		values             []string
	}{
		"cert-manager":              {release: "gitops-cm", namespace: "gitops-cm"},
		"self-managed certificates": {release: "gitops-self", namespace: "gitops-self", values: []string{certManagerOff}},
	}
	p := installPlane(t)
	a := newApplierFor(t, p)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ensureNamespace(t, p, tc.namespace)
			objs := applicable(t, renderChartAs(t, tc.release, tc.namespace, tc.values...))
			ctx, cancel := context.WithTimeout(context.Background(), 2*dryRunTimeout)
			defer cancel()
			applyAll(ctx, t, a, objs)
			waitEstablished(ctx, t, a, objs)
			checkReapplyKeepsVersions(ctx, t, a, objs)
			injectCABundles(ctx, t, a, objs)
			checkReapplyKeepsVersions(ctx, t, a, objs)
			for _, u := range webhookConfigurations(objs) {
				live, err := a.get(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				hooks, _, _ := unstructured.NestedSlice(live.Object, "webhooks")
				for _, h := range hooks {
					if ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); ca == "" {
						t.Errorf("%s: a re-apply dropped the injected caBundle", key(u))
					}
				}
			}
			checkDryRunDiffEmpty(ctx, t, a, objs)
		})
	}
}

// applicable drops the kinds the test control plane has no API for, and
// puts CustomResourceDefinitions first, as GitOps tools order them.
func applicable(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if _, skip := skippedKinds[u.GetKind()]; !skip {
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		return boolRank(a.GetKind() != "CustomResourceDefinition") - boolRank(b.GetKind() != "CustomResourceDefinition")
	})
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// applyAll server-side applies every object and returns their
// resourceVersions by key.
func applyAll(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	rvs := map[string]string{}
	for _, u := range objs {
		got, err := a.apply(ctx, u, gitopsManager, false)
		if err != nil {
			t.Fatalf("apply %s: %v", key(u), err)
		}
		rvs[key(u)] = got.GetResourceVersion()
	}
	return rvs
}

// liveVersions reads every object's resourceVersion.
func liveVersions(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	rvs := map[string]string{}
	for _, u := range objs {
		live, err := a.get(ctx, u)
		if err != nil {
			t.Fatalf("get %s: %v", key(u), err)
		}
		rvs[key(u)] = live.GetResourceVersion()
	}
	return rvs
}

// checkReapplyKeepsVersions applies everything again and fails for every
// object whose resourceVersion the apply changed.
func checkReapplyKeepsVersions(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	before := liveVersions(ctx, t, a, objs)
	after := applyAll(ctx, t, a, objs)
	for _, u := range objs {
		if k := key(u); before[k] != after[k] {
			t.Errorf("%s: re-applying the same manifest changed it (resourceVersion %s -> %s)", k, before[k], after[k])
		}
	}
}

// waitEstablished waits until the applied CRDs are established: the API
// server writes their status once, after the first apply.
func waitEstablished(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range ofKind(objs, "CustomResourceDefinition") {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			live, err := a.get(ctx, u)
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s not established: %v", key(u), err)
		}
	}
}

// injectCABundles writes a caBundle into every webhook of the webhook
// configurations, as another field manager, the way cert-manager's CA
// injector does.
func injectCABundles(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\ninjected\n-----END CERTIFICATE-----\n"))
	for _, u := range webhookConfigurations(objs) {
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		var patch []string
		for _, h := range hooks {
			patch = append(patch, fmt.Sprintf(`{"name":%q,"clientConfig":{"caBundle":%q}}`, h.(map[string]any)["name"], ca))
		}
		ri, err := a.resource(u)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"webhooks":[` + strings.Join(patch, ",") + `]}`)
		if _, err := ri.Patch(ctx, u.GetName(), types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: injectorManager}); err != nil {
			t.Fatalf("inject caBundle into %s: %v", key(u), err)
		}
	}
}

// webhookConfigurations returns the mutating and validating webhook
// configurations among objs.
func webhookConfigurations(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	return append(ofKind(objs, "MutatingWebhookConfiguration"), ofKind(objs, "ValidatingWebhookConfiguration")...)
}

// checkDryRunDiffEmpty dry-run applies every object and compares the
// answer with the live object, without managedFields, as `kubectl diff
// --server-side` does.
func checkDryRunDiffEmpty(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		dry, err := a.apply(ctx, u, gitopsManager, true)
		if err != nil {
			t.Fatalf("dry-run apply %s: %v", key(u), err)
		}
		live, err := a.get(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []*unstructured.Unstructured{dry, live} {
			unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
		}
		if !reflect.DeepEqual(dry.Object, live.Object) {
			t.Errorf("%s: kubectl diff --server-side would show (- live, + applied):\n%s", key(u), diff.Diff(live.Object, dry.Object))
		}
	}
}
