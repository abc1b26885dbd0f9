package deploy

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// testDigest is an image digest for the tests.
var testDigest = "sha256:" + strings.Repeat("ab", 32)

// TestComponentValues renders the per-component values operators know from
// cert-manager's and Gatekeeper's charts and checks each reaches the
// Deployment it names, and only that one.
func TestComponentValues(t *testing.T) {
	cases := map[string]struct {
		values []string
		check  func(t *testing.T, webhook, bridge *appsv1.Deployment, objs []*unstructured.Unstructured)
	}{
		"image digest wins over the tag": {
			values: []string{"webhook.image.digest=" + testDigest, "image.tag=9.9.9"},
			check: func(t *testing.T, webhook, bridge *appsv1.Deployment, _ []*unstructured.Unstructured) {
				want := map[*appsv1.Deployment]string{
					webhook: "ghcr.io/virtstation/virtstation-webhook@" + testDigest,
					bridge:  "ghcr.io/virtstation/virtstation-bridge:9.9.9",
				}
				for d, img := range want {
					if got := d.Spec.Template.Spec.Containers[0].Image; got != img {
						t.Errorf("%s: image %q, want %q", d.Name, got, img)
					}
				}
			},
		},
		"securityContexts merged per component": {
			values: []string{"webhook.podSecurityContext.fsGroup=65532", "bridge.containerSecurityContext.readOnlyRootFilesystem=false"},
			check:  checkSecurityContexts,
		},
		"extra env, volumes and mounts": {
			values: []string{
				"webhook.extraEnv[0].name=HTTPS_PROXY", "webhook.extraEnv[0].value=http://proxy.example.com:3128",
				"webhook.extraVolumes[0].name=extra-ca", "webhook.extraVolumes[0].configMap.name=corporate-ca",
				"webhook.extraVolumeMounts[0].name=extra-ca", "webhook.extraVolumeMounts[0].mountPath=/etc/ssl/extra",
				"bridge.extraEnv[0].name=NO_PROXY", "bridge.extraEnv[0].value=.svc",
				"bridge.extraVolumes[0].name=scratch", "bridge.extraVolumes[0].emptyDir.sizeLimit=1Mi",
				"bridge.extraVolumeMounts[0].name=scratch", "bridge.extraVolumeMounts[0].mountPath=/scratch",
			},
			check: checkExtras,
		},
		"host network on its own ports": {
			values: []string{"webhook.hostNetwork=true", "webhook.securePort=10260", "webhook.healthPort=10261", "webhook.metrics.port=10262"},
			check:  checkHostNetwork,
		},
		"defaults: pod network": {
			check: func(t *testing.T, webhook, bridge *appsv1.Deployment, _ []*unstructured.Unstructured) {
				for _, d := range []*appsv1.Deployment{webhook, bridge} {
					if s := d.Spec.Template.Spec; s.HostNetwork || s.DNSPolicy != "" {
						t.Errorf("%s: hostNetwork %v, dnsPolicy %q by default", d.Name, s.HostNetwork, s.DNSPolicy)
					}
					if d.Spec.Strategy.RollingUpdate != nil {
						t.Errorf("%s: strategy %+v by default, want the Deployment default", d.Name, d.Spec.Strategy)
					}
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := installation{objs: renderChart(t, tc.values...)}
			tc.check(t, in.deployment(t, "webhook"), in.deployment(t, "bridge"), in.objs)
		})
	}
}

func checkSecurityContexts(t *testing.T, webhook, bridge *appsv1.Deployment, _ []*unstructured.Unstructured) {
	t.Helper()
	wp := webhook.Spec.Template.Spec.SecurityContext
	if wp.FSGroup == nil || *wp.FSGroup != 65532 || !ptr.Deref(wp.RunAsNonRoot, false) || wp.SeccompProfile == nil {
		t.Errorf("webhook pod securityContext %+v: want fsGroup 65532 merged over the restricted defaults", wp)
	}
	if bp := bridge.Spec.Template.Spec.SecurityContext; bp.FSGroup != nil {
		t.Errorf("bridge pod securityContext %+v: got the webhook's fsGroup", bp)
	}
	bc := bridge.Spec.Template.Spec.Containers[0].SecurityContext
	if ptr.Deref(bc.ReadOnlyRootFilesystem, true) || ptr.Deref(bc.AllowPrivilegeEscalation, true) || bc.Capabilities == nil {
		t.Errorf("bridge container securityContext %+v: want readOnlyRootFilesystem false merged over the defaults", bc)
	}
	if wc := webhook.Spec.Template.Spec.Containers[0].SecurityContext; !ptr.Deref(wc.ReadOnlyRootFilesystem, false) {
		t.Errorf("webhook container securityContext %+v: got the bridge's override", wc)
	}
}

func checkExtras(t *testing.T, webhook, bridge *appsv1.Deployment, _ []*unstructured.Unstructured) {
	t.Helper()
	want := map[*appsv1.Deployment]struct{ env, volume, mount string }{
		webhook: {"HTTPS_PROXY", "extra-ca", "/etc/ssl/extra"},
		bridge:  {"NO_PROXY", "scratch", "/scratch"},
	}
	for d, w := range want {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == w.env }) || envFromField(c, "POD_NAMESPACE") == "" {
			t.Errorf("%s: env %+v, want %s besides POD_NAMESPACE", d.Name, c.Env, w.env)
		}
		if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == w.volume }) ||
			!slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "serving-cert" }) {
			t.Errorf("%s: volumes %+v, want %s besides serving-cert", d.Name, pod.Volumes, w.volume)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == w.volume && m.MountPath == w.mount }) {
			t.Errorf("%s: volumeMounts %+v, want %s at %s", d.Name, c.VolumeMounts, w.volume, w.mount)
		}
	}
}

func checkHostNetwork(t *testing.T, webhook, bridge *appsv1.Deployment, objs []*unstructured.Unstructured) {
	t.Helper()
	pod := webhook.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("webhook pod: hostNetwork %v, dnsPolicy %q; want true, ClusterFirstWithHostNet", pod.HostNetwork, pod.DNSPolicy)
	}
	if bridge.Spec.Template.Spec.HostNetwork {
		t.Error("the bridge is on the host network too")
	}
	// Host ports: a surge pod finds no node, so the rollout must not surge.
	if st := webhook.Spec.Strategy; st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil ||
		st.RollingUpdate.MaxSurge == nil || st.RollingUpdate.MaxSurge.IntValue() != 0 ||
		st.RollingUpdate.MaxUnavailable == nil || st.RollingUpdate.MaxUnavailable.IntValue() != 1 {
		t.Errorf("webhook strategy %+v, want RollingUpdate with maxSurge 0, maxUnavailable 1", st)
	}
	c := pod.Containers[0]
	for _, a := range []string{"--webhook-port=10260", "--health-probe-bind-address=:10261", "--metrics-bind-address=:10262"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("webhook args %v lack %s", c.Args, a)
		}
	}
	for name, port := range map[string]int32{"webhook-server": 10260, "health": 10261, "metrics": 10262} {
		if got := containerPort(c, intstrFromString(name)); got != port {
			t.Errorf("container port %s: %d, want %d", name, got, port)
		}
	}
	if containerPort(c, c.ReadinessProbe.HTTPGet.Port) != 10261 {
		t.Errorf("readiness probe on %v, want the health port 10261", c.ReadinessProbe.HTTPGet.Port)
	}
	svc := convert[corev1.Service](t, mustFind(t, objs, "Service", "virtstation-webhook"))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntValue() != 10260 || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("webhook Service ports %+v, want 443 to 10260", svc.Spec.Ports)
	}
	metrics := convert[corev1.Service](t, mustFind(t, objs, "Service", "virtstation-webhook-metrics"))
	if metrics.Spec.Ports[0].Port != 10262 || containerPort(c, metrics.Spec.Ports[0].TargetPort) != 10262 {
		t.Errorf("webhook metrics Service ports %+v, want 10262", metrics.Spec.Ports)
	}
}

// TestHostNetworkDryRun applies the host-network rendering server-side
// (dry run, strict) in a namespace that allows host networking, as its
// values.yaml comment asks.
func TestHostNetworkDryRun(t *testing.T) {
	const ns = "virtstation-hostnet"
	if err := createNamespace(controlPlane(t).Config, ns, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t)
	ctx, cancel := context.WithTimeout(context.Background(), dryRunTimeout)
	defer cancel()
	for _, u := range applicable(t, renderChartAs(t, "hostnet", ns, "webhook.hostNetwork=true", "webhook.securePort=10260")) {
		warnings, err := a.dryRun(ctx, u)
		if err != nil {
			t.Errorf("%s: %v", key(u), err)
		}
		for _, w := range warnings {
			t.Errorf("%s: warning: %s", key(u), w)
		}
	}
}

// TestServiceMonitorValues checks the ServiceMonitor values cert-manager's
// chart has, and how each endpoint authenticates: HTTPS (the metrics
// servers' --metrics-secure), a bearer token Prometheus sends (its own
// file, or a Secret as an authorization credential), and the bridge's CA
// only where the ServiceMonitor can read its Secret.
func TestServiceMonitorValues(t *testing.T) {
	cases := map[string]struct {
		values   []string
		ns       string
		want     map[string]any // endpoint fields, both ServiceMonitors
		bridgeCA bool
		userTLS  bool // the user's tlsConfig replaces the chart's whole
	}{
		"defaults": {
			values: []string{"serviceMonitor.enabled=true"}, ns: releaseNamespace, bridgeCA: true,
			want: map[string]any{"scheme": "https", "interval": "30s", "scrapeTimeout": "10s", "honorLabels": false,
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		},
		"every option": {
			values: []string{"serviceMonitor.enabled=true", "serviceMonitor.namespace=monitoring", "serviceMonitor.labels.release=prom",
				"serviceMonitor.interval=1m", "serviceMonitor.scrapeTimeout=20s", "serviceMonitor.honorLabels=true",
				"serviceMonitor.bearerTokenSecret.name=prometheus-token",
				"serviceMonitor.endpointAdditionalProperties.metricRelabelings[0].action=drop",
				"serviceMonitor.endpointAdditionalProperties.metricRelabelings[0].regex=go_.*"},
			ns: "monitoring",
			want: map[string]any{"scheme": "https", "interval": "1m", "scrapeTimeout": "20s", "honorLabels": true,
				"authorization":     map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prometheus-token", "key": "token"}},
				"metricRelabelings": []any{map[string]any{"action": "drop", "regex": "go_.*"}}},
		},
		"a tlsConfig of the user's": {
			values: []string{"serviceMonitor.enabled=true",
				"serviceMonitor.endpointAdditionalProperties.tlsConfig.serverName=metrics.example.com",
				"serviceMonitor.endpointAdditionalProperties.tlsConfig.ca.secret.name=metrics-ca",
				"serviceMonitor.endpointAdditionalProperties.tlsConfig.ca.secret.key=ca.crt",
				"serviceMonitor.endpointAdditionalProperties.honorTimestamps=false"},
			ns: releaseNamespace, userTLS: true,
			want: map[string]any{"scheme": "https", "honorTimestamps": false,
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				// Replaced, not merged: no insecureSkipVerify, no chart CA.
				"tlsConfig": map[string]any{"serverName": "metrics.example.com",
					"ca": map[string]any{"secret": map[string]any{"name": "metrics-ca", "key": "ca.crt"}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, tc.values...)
			for _, sm := range ofKind(objs, "ServiceMonitor") {
				checkServiceMonitor(t, objs, sm)
				if sm.GetNamespace() != tc.ns {
					t.Errorf("%s: in namespace %q, want %q", key(sm), sm.GetNamespace(), tc.ns)
				}
				if sel, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Equal(sel, []string{releaseNamespace}) {
					t.Errorf("%s: namespaceSelector %v, want the release namespace", key(sm), sel)
				}
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				e := eps[0].(map[string]any)
				for k, v := range tc.want {
					if !reflect.DeepEqual(e[k], v) {
						t.Errorf("%s: endpoint %s = %v, want %v", key(sm), k, e[k], v)
					}
				}
				if _, both := e["authorization"]; both && e["bearerTokenFile"] != nil {
					t.Errorf("%s: both a bearerTokenFile and an authorization credential", key(sm))
				}
				if tc.userTLS {
					continue
				}
				_, hasCA, _ := unstructured.NestedMap(e, "tlsConfig", "ca")
				wantCA := tc.bridgeCA && strings.HasSuffix(sm.GetName(), "-bridge")
				if hasCA != wantCA || (!hasCA && e["tlsConfig"].(map[string]any)["insecureSkipVerify"] != true) {
					t.Errorf("%s: tlsConfig %v; want the bridge's CA: %v, else insecureSkipVerify", key(sm), e["tlsConfig"], wantCA)
				}
			}
		})
	}
}

// intstrFromString is a named port.
func intstrFromString(name string) intstr.IntOrString { return intstr.FromString(name) }
