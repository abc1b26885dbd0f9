package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
)

// clientCAValues turn on webhook.clientCA from the ConfigMap the kustomize
// component names.
var clientCAValues = []string{"webhook.clientCA.enabled=true", "webhook.clientCA.configMapName=virtstation-webhook-client-ca"}

// renderClientCAOverlay renders config/default with the webhook-client-ca
// component, as an operator's overlay would.
func renderClientCAOverlay(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return renderOverlay(t, "webhook-client-ca")
}

// renderOverlay renders config/default with the component of
// config/components, as an operator's overlay would.
func renderOverlay(t *testing.T, component string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(elem ...string) string {
		p, err := filepath.Rel(dir, filepath.Join(append([]string{root}, elem...)...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources:\n  - " + rel("config", "default") + "\n" +
		"components:\n  - " + rel("config", "components", component) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := kustomizeYAML(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestWebhookClientCA checks webhook.clientCA and its kustomize component:
// the webhook gets --client-ca-file pointing into a read-only directory
// mount of the CA (not a subPath, which the kubelet never updates), the
// chart and the component render the same webhook Deployment, and a
// half-set value is refused at helm time.
func TestWebhookClientCA(t *testing.T) {
	chart := renderChart(t, clientCAValues...)
	webhook := func(objs []*unstructured.Unstructured) *unstructured.Unstructured {
		for _, u := range ofKind(objs, "Deployment") {
			if strings.HasSuffix(u.GetName(), "-webhook") {
				return u
			}
		}
		t.Fatal("no webhook Deployment")
		return nil
	}
	d := convert[appsv1.Deployment](t, webhook(chart))
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--client-ca-file=/etc/virtstation/client-ca/ca.crt") {
		t.Errorf("webhook args %v lack --client-ca-file", c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == "client-ca" {
			mounted = m.MountPath == "/etc/virtstation/client-ca" && m.ReadOnly && m.SubPath == ""
		}
	}
	if !mounted {
		t.Errorf("webhook volumeMounts %+v: want client-ca read-only at /etc/virtstation/client-ca, no subPath", c.VolumeMounts)
	}

	withNames := convert[appsv1.Deployment](t, webhook(renderChart(t, append(clientCAValues, "webhook.clientCA.allowedNames={a,b}")...)))
	if args := withNames.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--client-allowed-names=a,b") {
		t.Errorf("webhook args %v lack --client-allowed-names=a,b", args)
	}
	fromSecret := convert[appsv1.Deployment](t, webhook(renderChart(t, "webhook.clientCA.enabled=true", "webhook.clientCA.secretName=ca", "webhook.clientCA.key=tls.crt")))
	var secretVolume bool
	for _, v := range fromSecret.Spec.Template.Spec.Volumes {
		secretVolume = secretVolume || (v.Name == "client-ca" && v.Secret != nil && v.Secret.SecretName == "ca")
	}
	if !secretVolume || !slices.Contains(fromSecret.Spec.Template.Spec.Containers[0].Args, "--client-ca-file=/etc/virtstation/client-ca/tls.crt") {
		t.Errorf("webhook.clientCA.secretName=ca, key=tls.crt: volumes %+v args %v", fromSecret.Spec.Template.Spec.Volumes, fromSecret.Spec.Template.Spec.Containers[0].Args)
	}

	n := normalized(t, []*unstructured.Unstructured{webhook(chart)})
	k := normalized(t, []*unstructured.Unstructured{webhook(renderClientCAOverlay(t))})
	for name, obj := range n {
		if !equalJSON(obj, k[name]) {
			t.Errorf("%s differs (- chart with webhook.clientCA, + config/default with the webhook-client-ca component):\n%s", name, diff.Diff(obj, k[name]))
		}
	}

	for name, set := range map[string][]string{
		"enabled without a source": {"webhook.clientCA.enabled=true"},
		"both sources":             {"webhook.clientCA.enabled=true", "webhook.clientCA.secretName=a", "webhook.clientCA.configMapName=b"},
	} {
		args := []string{"template", releaseName, chartDir(t)}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if _, err := runHelm(t, args...); err == nil || !strings.Contains(err.Error(), "exactly one of webhook.clientCA.secretName and webhook.clientCA.configMapName") {
			t.Errorf("%s: helm template: %v, want the exactly-one error", name, err)
		}
	}
}
