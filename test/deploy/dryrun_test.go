package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/internal/testenv"
)

// dryRunTimeout bounds one rendering's dry-run apply; each object is one
// request to a local API server.
const dryRunTimeout = 2 * time.Minute

// fieldManager is who the dry-run applies claim to be.
const fieldManager = "virtstation-deploy-test"

// skippedKinds are rendered but not applied, with the reason. None at the
// moment: the ServiceMonitor CRD (prometheus-operator's, in
// testdata/crds) is installed beside the KubeVirt, CDI and cert-manager
// ones.
var skippedKinds = map[string]string{}

var (
	cpOnce sync.Once
	cp     *testenv.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, p := range []*testenv.ControlPlane{cp, ip} {
		if p != nil {
			if err := p.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop control plane:", err)
			}
		}
	}
	os.Exit(code)
}

// startWithCRDs starts a control plane with the KubeVirt, CDI and
// cert-manager CRDs installed, and prometheus-operator's ServiceMonitor.
func startWithCRDs(root string) (*testenv.ControlPlane, error) {
	p, err := testenv.StartControlPlane()
	if err != nil {
		return nil, err
	}
	if _, err := crenvtest.InstallCRDs(p.Config, crenvtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(root, "internal", "testenv", "crds"), filepath.Join(root, "test", "deploy", "testdata", "crds")},
		ErrorIfPathMissing: true,
	}); err != nil {
		return p, err
	}
	return p, nil
}

// controlPlane starts, once, a kube-apiserver with the KubeVirt, CDI and
// cert-manager CRDs and the install namespace, which enforces the
// "restricted" Pod Security Standard and warns on violations.
func controlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	root := repoRoot(t)
	cpOnce.Do(func() {
		if cp, cpErr = startWithCRDs(root); cpErr != nil {
			return
		}
		cpErr = createNamespace(cp.Config, releaseNamespace, map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		})
	})
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	return cp
}

func createNamespace(cfg *rest.Config, name string, labels map[string]string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// applier server-side applies objects with dryRun=All and strict field
// validation, and collects the API server's warnings.
type applier struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *testenv.WarningRecorder
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	return newApplierFor(t, controlPlane(t))
}

// newApplierFor is an applier for the control plane p.
func newApplierFor(t *testing.T, p *testenv.ControlPlane) *applier {
	t.Helper()
	cfg := rest.CopyConfig(p.Config)
	a := &applier{warnings: &testenv.WarningRecorder{}}
	cfg.WarningHandlerWithContext = a.warnings
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.mapper, err = apiutil.NewDynamicRESTMapper(cfg, hc); err != nil {
		t.Fatal(err)
	}
	if a.dyn, err = dynamic.NewForConfigAndClient(cfg, hc); err != nil {
		t.Fatal(err)
	}
	return a
}

// dryRun applies u as `kubectl apply --server-side --dry-run=server
// --validate=strict` would, returning the warnings the API server sent.
func (a *applier) dryRun(ctx context.Context, u *unstructured.Unstructured) ([]string, error) {
	ri, err := a.resource(u)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	a.warnings.Take()
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: fieldManager, Force: ptr.To(true),
		FieldValidation: metav1.FieldValidationStrict,
	})
	return a.warnings.Take(), err
}

// TestServerSideDryRun applies every object the chart (in several
// configurations) and config/default render, and fails on any refusal or
// warning: unknown or misspelled fields (strict validation, against the
// real CRD schemas of cert-manager), invalid values, and pods that break
// the "restricted" Pod Security Standard of the install namespace.
func TestServerSideDryRun(t *testing.T) {
	cases := map[string]func(t *testing.T) []*unstructured.Unstructured{
		"chart":                           func(t *testing.T) []*unstructured.Unstructured { return renderChart(t) },
		"chart certManager.enabled=false": func(t *testing.T) []*unstructured.Unstructured { return renderChart(t, certManagerOff) },
		"chart with every option": func(t *testing.T) []*unstructured.Unstructured {
			return renderChart(t,
				"networkPolicy.enabled=true",
				`networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`,
				`networkPolicy.bridgeFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=ingress-nginx`,
				"serviceMonitor.enabled=true",
				"bridge.tls.existingSecret=bridge-tls",
				"bridge.allowedOrigins={https://kubevirt-manager.example.com,https://console.example.com}",
				"bridge.service.type=LoadBalancer",
				"webhook.podAntiAffinity=hard",
				"webhook.excludedNamespaces={team-infra}",
				"webhook.priorityClassName=system-cluster-critical",
				"webhook.extraArgs={--zap-devel=false}",
				"image.pullSecrets={regcred}",
				"webhook.clientCA.enabled=true", "webhook.clientCA.secretName=webhook-client-ca",
				"webhook.clientCA.allowedNames={kube-apiserver-webhook-client}",
				openReportsOn, "audit.interval=30m",
				"webhook.image.digest=sha256:"+strings.Repeat("0", 64), "bridge.image.digest=sha256:"+strings.Repeat("1", 64),
				"webhook.podSecurityContext.fsGroup=65532", "bridge.containerSecurityContext.readOnlyRootFilesystem=false",
				"webhook.extraEnv[0].name=HTTPS_PROXY", "webhook.extraEnv[0].value=http://proxy.example.com:3128",
				"webhook.extraVolumes[0].name=extra-ca", "webhook.extraVolumes[0].configMap.name=corporate-ca",
				"webhook.extraVolumeMounts[0].name=extra-ca", "webhook.extraVolumeMounts[0].mountPath=/etc/ssl/extra",
				"bridge.extraEnv[0].name=NO_PROXY", "bridge.extraEnv[0].value=.svc",
				"bridge.extraVolumes[0].name=scratch", "bridge.extraVolumes[0].emptyDir.sizeLimit=1Mi",
				"bridge.extraVolumeMounts[0].name=scratch", "bridge.extraVolumeMounts[0].mountPath=/scratch",
				"webhook.securePort=10260", "webhook.healthPort=10261", "webhook.metrics.port=10262",
				"serviceMonitor.scrapeTimeout=20s", "serviceMonitor.honorLabels=true", "serviceMonitor.labels.release=prom",
				"serviceMonitor.bearerTokenSecret.name=prometheus-token", "serviceMonitor.annotations.team=platform",
				"serviceMonitor.endpointAdditionalProperties.metricRelabelings[0].action=drop",
				"serviceMonitor.endpointAdditionalProperties.metricRelabelings[0].regex=go_.*",
			)
		},
		"chart without cert-manager, bridge TLS from a Secret": func(t *testing.T) []*unstructured.Unstructured {
			return renderChart(t, certManagerOff, "bridge.tls.existingSecret=bridge-tls", "networkPolicy.enabled=true")
		},
		"chart without the bridge or the example role": func(t *testing.T) []*unstructured.Unstructured {
			return renderChart(t, "bridge.enabled=false", "workstationUserRole.create=false", "networkPolicy.enabled=true")
		},
		"chart with policy reports off": func(t *testing.T) []*unstructured.Unstructured {
			return renderChart(t, "audit.policyReports.enabled=false")
		},
		"kustomize config/default":                    func(t *testing.T) []*unstructured.Unstructured { return renderKustomize(t, "config/default") },
		"kustomize config/default, webhook-client-ca": renderClientCAOverlay,
	}
	a := newApplier(t)
	for name, render := range cases {
		t.Run(name, func(t *testing.T) {
			objs := render(t)
			ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
			defer cancel()
			applied := 0
			for _, u := range objs {
				if why, skip := skippedKinds[u.GetKind()]; skip {
					t.Logf("%s not applied: %s", key(u), why)
					continue
				}
				warnings, err := a.dryRun(ctx, u)
				if err != nil {
					t.Errorf("%s: %v", key(u), err)
				}
				for _, w := range warnings {
					t.Errorf("%s: warning: %s", key(u), w)
				}
				applied++
			}
			t.Logf("%d objects accepted", applied)
		})
	}
}

// TestDryRunRefusesMistakes shows that the dry run catches what it is there
// to catch: a misspelled field in a built-in object, in a cert-manager
// object (CRD schema) and in a webhook configuration, and a pod that breaks
// the restricted Pod Security Standard.
func TestDryRunRefusesMistakes(t *testing.T) {
	objs := renderChart(t)
	cases := map[string]struct {
		kind, name string
		mutate     func(u *unstructured.Unstructured) error
		wantErr    string
		wantWarn   string
	}{
		"Deployment field": {
			kind: "Deployment", name: "virtstation-webhook",
			mutate: func(u *unstructured.Unstructured) error {
				return unstructured.SetNestedField(u.Object, int64(2), "spec", "replica")
			},
			wantErr: `.spec.replica: field not declared in schema`,
		},
		"container field": {
			kind: "Deployment", name: "virtstation-bridge",
			mutate: func(u *unstructured.Unstructured) error {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				cs[0].(map[string]any)["imagePullPolicyy"] = "Always"
				return unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
			},
			wantErr: `.spec.template.spec.containers[name="bridge"].imagePullPolicyy: field not declared in schema`,
		},
		"cert-manager Certificate field": {
			kind: "Certificate", name: "virtstation-webhook",
			mutate: func(u *unstructured.Unstructured) error {
				return unstructured.SetNestedStringSlice(u.Object, []string{"x.example"}, "spec", "dnsName")
			},
			wantErr: `.spec.dnsName: field not declared in schema`,
		},
		"webhook configuration field": {
			kind: "ValidatingWebhookConfiguration", name: "virtstation-validating",
			mutate: func(u *unstructured.Unstructured) error {
				hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
				hooks[0].(map[string]any)["timeoutSecond"] = int64(5)
				return unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
			},
			wantErr: `.webhooks[name="datavolume-delete.validate.virtstation.io"].timeoutSecond: field not declared in schema`,
		},
		"pod without its securityContext": {
			kind: "Deployment", name: "virtstation-webhook",
			mutate: func(u *unstructured.Unstructured) error {
				unstructured.RemoveNestedField(u.Object, "spec", "template", "spec", "securityContext")
				return nil
			},
			wantWarn: `would violate PodSecurity "restricted:latest"`,
		},
	}
	a := newApplier(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := mustFind(t, objs, tc.kind, tc.name).DeepCopy()
			if err := tc.mutate(u); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
			defer cancel()
			warnings, err := a.dryRun(ctx, u)
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("dry run: %v, want an error with %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && err != nil {
				t.Errorf("dry run: %v", err)
			}
			if tc.wantWarn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.wantWarn) {
				t.Errorf("warnings %q, want one with %q", warnings, tc.wantWarn)
			}
		})
	}
}

// TestHelmInstallDryRunServer runs `helm install --dry-run=server` against
// the control plane: Helm's own checks against a live API server (kinds
// known, Kubernetes version, no conflicting objects), and NOTES.txt
// rendered as a user sees it.
func TestHelmInstallDryRunServer(t *testing.T) {
	kubeconfig := writeKubeconfig(t, controlPlane(t).Config)
	cases := map[string]struct {
		values []string
		want   []string
	}{
		"cert-manager": {
			want: []string{
				"kubectl -n virtstation-system get certificates",
				`virtstation.io/managed: "true"`,
				"--clusterrole=virtstation-workstation-user",
				"kubectl -n virtstation-system port-forward service/virtstation-bridge 8443:443",
				"https://localhost:8443/ui/namespaces/workstations/virtualmachines/dev-alice#token=$(kubectl -n workstations create token alice)",
				"Metrics: the bridge serves /metrics on Service virtstation-bridge-metrics, port\n8080 (HTTPS)",
				"--clusterrole=virtstation-bridge-metrics-reader --serviceaccount=<namespace>:<prometheus>",
				"Policy audit: every 10m,",
				"kubectl get policyreports -A -l app.kubernetes.io/managed-by=virtstation",
				"keeps it\non uninstall (helm.sh/resource-policy: keep)",
			},
		},
		"policy reports off": {
			values: []string{"audit.policyReports.enabled=false"},
			want:   []string{"Policy audit: reports are off (audit.policyReports.enabled=false)"},
		},
		"Reports too": {
			values: []string{openReportsOn},
			want:   []string{"kubectl get reports.openreports.io -A -l app.kubernetes.io/managed-by=virtstation"},
		},
		"self-managed certificates": {
			values: []string{certManagerOff},
			want: []string{
				"Secret\nvirtstation-system/virtstation-webhook-certs",
				"http://localhost:8443/ui/namespaces/workstations/virtualmachines/dev-alice#token=",
				"WARNING: the bridge serves plain HTTP",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"install", releaseName, chartDir(t), "--namespace", releaseNamespace,
				"--dry-run=server", "--kubeconfig", kubeconfig}
			for _, v := range tc.values {
				args = append(args, "--set", v)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			_, notes, ok := strings.Cut(out, "\nNOTES:\n")
			if !ok {
				t.Fatalf("no NOTES in:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig for cfg's administrator.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	server := cfg.Host
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
