package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/virtstation/virtstation/api"
)

// installation is one rendering of Virtstation, decoded.
type installation struct {
	objs      []*unstructured.Unstructured
	namespace string
	// certManager is whether cert-manager issues the certificates.
	certManager bool
}

// TestInstallations checks each rendering for what a platform team relies
// on: two replicas behind a PodDisruptionBudget and anti-affinity, probes,
// a restricted securityContext, webhooks that only see Virtstation's own
// objects and fail closed, and certificate wiring that holds together.
func TestInstallations(t *testing.T) {
	cases := map[string]struct {
		render      func(t *testing.T) []*unstructured.Unstructured
		namespace   string
		certManager bool
	}{
		"chart": {
			render:    func(t *testing.T) []*unstructured.Unstructured { return renderChart(t) },
			namespace: releaseNamespace, certManager: true,
		},
		"chart certManager.enabled=false": {
			render:    func(t *testing.T) []*unstructured.Unstructured { return renderChart(t, certManagerOff) },
			namespace: releaseNamespace,
		},
		"chart as release ws in namespace tools": {
			render:    func(t *testing.T) []*unstructured.Unstructured { return renderChartAs(t, "ws", "tools") },
			namespace: "tools", certManager: true,
		},
		"chart as release ws in namespace tools, certManager.enabled=false": {
			render: func(t *testing.T) []*unstructured.Unstructured {
				return renderChartAs(t, "ws", "tools", certManagerOff)
			},
			namespace: "tools",
		},
		"kustomize config/default": {
			render:    func(t *testing.T) []*unstructured.Unstructured { return renderKustomize(t, "config/default") },
			namespace: releaseNamespace, certManager: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := installation{objs: tc.render(t), namespace: tc.namespace, certManager: tc.certManager}
			webhook, bridge := in.deployment(t, "webhook"), in.deployment(t, "bridge")
			for _, d := range []*appsv1.Deployment{webhook, bridge} {
				in.checkDeployment(t, d)
			}
			in.checkProbes(t, webhook, "/healthz", "/readyz", 8081)
			in.checkProbes(t, bridge, "/healthz", "/readyz", 8443)
			if l := webhook.Spec.Template.Spec.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil {
				t.Errorf("Deployment %s: no preStop sleep; a terminating replica would refuse admissions still routed to it", webhook.Name)
			}
			svc := in.checkWebhookConfigurations(t, webhook)
			if in.certManager {
				in.checkCertManager(t, webhook, bridge, svc)
			} else {
				in.checkSelfManagedCerts(t, webhook, svc)
			}
			in.checkRBACSubjects(t)
		})
	}
}

// deployment returns the Deployment of a component (by its container's name).
func (in installation) deployment(t *testing.T, component string) *appsv1.Deployment {
	t.Helper()
	var found []*appsv1.Deployment
	for _, u := range ofKind(in.objs, "Deployment") {
		d := convert[appsv1.Deployment](t, u)
		if len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Name == component {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s Deployment, got %d among %v", component, len(found), keys(in.objs))
	}
	return found[0]
}

// selects lists the objects of kind whose label selector (at path) selects
// the Deployment's pods.
func (in installation) selects(t *testing.T, d *appsv1.Deployment, kind string, sel func(*unstructured.Unstructured) labels.Selector) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, u := range ofKind(in.objs, kind) {
		if s := sel(u); s != nil && !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, u)
		}
	}
	return out
}

func (in installation) checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	name := d.Name
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment %s: replicas %v, want 2", name, d.Spec.Replicas)
	}
	if d.Namespace != in.namespace {
		t.Errorf("Deployment %s: namespace %q, want %q", name, d.Namespace, in.namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Deployment %s: selector %v does not select its own pods %v (%v)", name, d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	pod := d.Spec.Template.Spec
	if find(in.objs, "ServiceAccount", pod.ServiceAccountName) == nil {
		t.Errorf("Deployment %s: ServiceAccount %q is not installed", name, pod.ServiceAccountName)
	}

	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("Deployment %s: pod securityContext.runAsNonRoot is not true", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("Deployment %s: pod seccompProfile is not RuntimeDefault", name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("Deployment %s container %s: no securityContext", name, c.Name)
			continue
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("Deployment %s container %s: root filesystem is not read-only", name, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("Deployment %s container %s: privilege escalation is not off", name, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("Deployment %s container %s: capabilities %+v, want drop [ALL] and nothing added", name, c.Name, sc.Capabilities)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("Deployment %s container %s: no cpu and memory requests", name, c.Name)
		}
		if got := envFromField(c, "POD_NAMESPACE"); got != "metadata.namespace" {
			t.Errorf("Deployment %s container %s: POD_NAMESPACE from %q, want metadata.namespace", name, c.Name, got)
		}
	}

	aff := pod.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Errorf("Deployment %s: no preferred pod anti-affinity", name)
	} else {
		term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		s, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || !s.Matches(labels.Set(d.Spec.Template.Labels)) || term.TopologyKey != corev1.LabelHostname {
			t.Errorf("Deployment %s: anti-affinity %+v does not spread its own pods over hosts", name, term)
		}
	}

	pdbs := in.selects(t, d, "PodDisruptionBudget", func(u *unstructured.Unstructured) labels.Selector {
		p := convert[policyv1.PodDisruptionBudget](t, u)
		s, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		return s
	})
	if len(pdbs) != 1 {
		t.Errorf("Deployment %s: %d PodDisruptionBudgets select its pods, want 1", name, len(pdbs))
	} else if p := convert[policyv1.PodDisruptionBudget](t, pdbs[0]); p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("%s: maxUnavailable %v, want 1 (one of two replicas keeps serving)", key(pdbs[0]), p.Spec.MaxUnavailable)
	}
}

func envFromField(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// checkProbes checks liveness on healthz and readiness on readyz, at port.
func (in installation) checkProbes(t *testing.T, d *appsv1.Deployment, healthz, readyz string, port int32) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, healthz}, {"readiness", c.ReadinessProbe, readyz}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("Deployment %s: no HTTP %s probe", d.Name, p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || containerPort(c, p.probe.HTTPGet.Port) != port {
			t.Errorf("Deployment %s: %s probe on %s port %s, want %s on %d", d.Name, p.kind, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, port)
		}
	}
}

// containerPort resolves a named or numbered port of c.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// webhookRule is what each webhook must select and how it must behave.
type webhookRule struct {
	label       string
	exists      bool // an Exists expression instead of label=true
	ownNSAllowd bool // the policy webhook must see the install namespace
	// unlabelled: the webhook sees the objects NOT labelled label=true
	// (a NotIn expression), and so must fail open (failurePolicy Ignore).
	unlabelled bool
	// everyObject: the webhook has no objectSelector, it sees every
	// object of its kind (VMIs, virt-controller's included) that its
	// matchConditions pass, and so must fail open.
	everyObject bool
}

var webhookRules = map[string]webhookRule{
	"vm.mutate.virtstation.io":                    {label: api.LabelManaged},
	"vm.validate.virtstation.io":                  {label: api.LabelManaged},
	"datavolume-delete.validate.virtstation.io":   {label: api.LabelDataDisk},
	"pvc-delete.validate.virtstation.io":          {label: api.LabelDataDisk},
	"policy.validate.virtstation.io":              {label: api.LabelPolicy, exists: true, ownNSAllowd: true},
	"vm-unmanaged.validate.virtstation.io":        {label: api.LabelManaged, unlabelled: true},
	"vm-status.validate.virtstation.io":           {label: api.LabelManaged},
	"vm-status-unmanaged.validate.virtstation.io": {label: api.LabelManaged, unlabelled: true},
	"vmi.validate.virtstation.io":                 {everyObject: true},
}

// checkWebhookConfigurations checks every webhook's selectors, failure
// policy, timeout and Service, and returns the Service they call.
func (in installation) checkWebhookConfigurations(t *testing.T, webhook *appsv1.Deployment) *corev1.Service {
	t.Helper()
	type hook struct {
		config, name string
		client       admissionregistrationv1.WebhookClientConfig
		failure      *admissionregistrationv1.FailurePolicyType
		timeout      *int32
		ns, obj      *metav1.LabelSelector
	}
	var hooks []hook
	for _, u := range ofKind(in.objs, "MutatingWebhookConfiguration") {
		c := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, u)
		for _, w := range c.Webhooks {
			hooks = append(hooks, hook{key(u), w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector})
		}
	}
	for _, u := range ofKind(in.objs, "ValidatingWebhookConfiguration") {
		c := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, u)
		for _, w := range c.Webhooks {
			hooks = append(hooks, hook{key(u), w.Name, w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector})
		}
	}
	var seen []string
	var svcName string
	for _, h := range hooks {
		where := h.config + " webhook " + h.name
		seen = append(seen, h.name)
		rule, ok := webhookRules[h.name]
		if !ok {
			t.Errorf("%s: not a webhook this test knows; add it to webhookRules", where)
			continue
		}
		// Failing closed is safe only because the objectSelector keeps
		// everything but Virtstation's own objects out; a webhook that sees
		// other objects must fail open.
		wantFailure := admissionregistrationv1.Fail
		if rule.unlabelled || rule.everyObject {
			wantFailure = admissionregistrationv1.Ignore
		}
		if h.failure == nil || *h.failure != wantFailure {
			t.Errorf("%s: failurePolicy %v, want %s", where, h.failure, wantFailure)
		}
		if !selectsOnlyLabelled(h.obj, rule) {
			t.Errorf("%s: objectSelector %+v, want only objects labelled %s (or, for %s, only those not labelled so)", where, h.obj, rule.label, h.name)
		}
		if h.timeout == nil || *h.timeout < 1 || *h.timeout > 10 {
			t.Errorf("%s: timeoutSeconds %v, want 1-10", where, h.timeout)
		}
		excluded := excludedNamespaces(h.ns)
		if !slices.Contains(excluded, "kube-system") && !rule.ownNSAllowd {
			t.Errorf("%s: namespaceSelector %+v does not exclude kube-system", where, h.ns)
		}
		if !rule.ownNSAllowd && !slices.Contains(excluded, in.namespace) {
			t.Errorf("%s: namespaceSelector %+v does not exclude the install namespace %s", where, h.ns, in.namespace)
		}
		if rule.ownNSAllowd && slices.Contains(excluded, in.namespace) {
			t.Errorf("%s: namespaceSelector excludes %s, where policy ConfigMaps live", where, in.namespace)
		}
		s := h.client.Service
		if s == nil || s.Namespace != in.namespace || (svcName != "" && s.Name != svcName) {
			t.Errorf("%s: clientConfig.service %+v, want one Service in %s for every webhook", where, s, in.namespace)
			continue
		}
		svcName = s.Name
		if len(h.client.CABundle) > 0 {
			t.Errorf("%s: a caBundle is rendered; it must come from the CA injector or the webhook", where)
		}
	}
	slices.Sort(seen)
	want := make([]string, 0, len(webhookRules))
	for n := range webhookRules {
		want = append(want, n)
	}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("webhooks %v, want %v", seen, want)
	}

	u := mustFind(t, in.objs, "Service", svcName)
	svc := convert[corev1.Service](t, u)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(webhook.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("%s: selector %v does not select the webhook's pods %v", key(u), svc.Spec.Selector, webhook.Spec.Template.Labels)
	}
	ok := false
	for _, p := range svc.Spec.Ports {
		ok = ok || (p.Port == 443 && containerPort(webhook.Spec.Template.Spec.Containers[0], p.TargetPort) == 9443)
	}
	if !ok {
		t.Errorf("%s: no port 443 to the webhook server's 9443: %+v", key(u), svc.Spec.Ports)
	}
	return svc
}

// selectsOnlyLabelled reports whether sel selects exactly the objects with
// the rule's label (=true, or present), or, for an unlabelled rule, exactly
// those without label=true.
func selectsOnlyLabelled(sel *metav1.LabelSelector, rule webhookRule) bool {
	if rule.everyObject {
		return sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
	}
	if sel == nil {
		return false
	}
	if rule.unlabelled {
		return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 1 && sel.MatchExpressions[0].Key == rule.label &&
			sel.MatchExpressions[0].Operator == metav1.LabelSelectorOpNotIn && slices.Equal(sel.MatchExpressions[0].Values, []string{api.LabelTrue})
	}
	if rule.exists {
		return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 1 &&
			sel.MatchExpressions[0].Key == rule.label && sel.MatchExpressions[0].Operator == metav1.LabelSelectorOpExists
	}
	return len(sel.MatchExpressions) == 0 && len(sel.MatchLabels) == 1 && sel.MatchLabels[rule.label] == api.LabelTrue
}

// excludedNamespaces returns the names a kubernetes.io/metadata.name NotIn
// expression excludes.
func excludedNamespaces(sel *metav1.LabelSelector) []string {
	if sel == nil {
		return nil
	}
	var out []string
	for _, e := range sel.MatchExpressions {
		if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpNotIn {
			out = append(out, e.Values...)
		}
	}
	return out
}

// checkCertManager follows the chain self-signed Issuer → CA Certificate →
// CA Issuer → serving Certificates, and checks that the webhook
// configurations inject the CA of the certificate the webhook serves, and
// that it names the webhook Service.
func (in installation) checkCertManager(t *testing.T, webhook, bridge *appsv1.Deployment, svc *corev1.Service) {
	t.Helper()
	issuers := map[string]*cmapi.Issuer{}
	for _, u := range ofKind(in.objs, cmapi.IssuerKind) {
		issuers[u.GetName()] = convert[cmapi.Issuer](t, u)
	}
	certs := map[string]*cmapi.Certificate{}
	bySecret := map[string]*cmapi.Certificate{}
	for _, u := range ofKind(in.objs, cmapi.CertificateKind) {
		c := convert[cmapi.Certificate](t, u)
		certs[c.Name], bySecret[c.Spec.SecretName] = c, c
	}
	issuerOf := func(c *cmapi.Certificate) *cmapi.Issuer {
		if c.Spec.IssuerRef.Kind != cmapi.IssuerKind || c.Spec.IssuerRef.Group != "cert-manager.io" {
			t.Errorf("Certificate %s: issuerRef %+v, want an Issuer of cert-manager.io", c.Name, c.Spec.IssuerRef)
		}
		return issuers[c.Spec.IssuerRef.Name]
	}
	// chainOK reports whether c is issued by a CA Issuer whose CA comes
	// from a self-signed Issuer.
	chainOK := func(c *cmapi.Certificate) error {
		caIssuer := issuerOf(c)
		if caIssuer == nil || caIssuer.Spec.CA == nil {
			return fmt.Errorf("issuer %q is not a CA Issuer of this installation", c.Spec.IssuerRef.Name)
		}
		ca := bySecret[caIssuer.Spec.CA.SecretName]
		if ca == nil || !ca.Spec.IsCA {
			return fmt.Errorf("CA Issuer %s: Secret %q is not a CA Certificate's", caIssuer.Name, caIssuer.Spec.CA.SecretName)
		}
		root := issuerOf(ca)
		if root == nil || root.Spec.SelfSigned == nil {
			return fmt.Errorf("CA Certificate %s is not issued by a self-signed Issuer", ca.Name)
		}
		if ca.Spec.PrivateKey == nil || ca.Spec.PrivateKey.RotationPolicy != cmapi.RotationPolicyAlways {
			return fmt.Errorf("CA Certificate %s: private key not rotated on renewal", ca.Name)
		}
		return nil
	}

	secret := secretVolume(webhook, "/tmp/k8s-webhook-server/serving-certs")
	serving := bySecret[secret]
	if serving == nil {
		t.Fatalf("the webhook serves Secret %q, which no Certificate issues (%v)", secret, keys(in.objs))
	}
	if err := chainOK(serving); err != nil {
		t.Errorf("webhook Certificate %s: %v", serving.Name, err)
	}
	if want := svc.Name + "." + in.namespace + ".svc"; !slices.Contains(serving.Spec.DNSNames, want) {
		t.Errorf("webhook Certificate %s: dnsNames %v lack %s, the name the API server dials", serving.Name, serving.Spec.DNSNames, want)
	}
	if !slices.Contains(serving.Spec.Usages, cmapi.UsageServerAuth) {
		t.Errorf("webhook Certificate %s: usages %v lack server auth", serving.Name, serving.Spec.Usages)
	}
	want := in.namespace + "/" + serving.Name
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, u := range ofKind(in.objs, kind) {
			if got := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
				t.Errorf("%s: cert-manager.io/inject-ca-from %q, want %q", key(u), got, want)
			}
		}
	}

	if s := secretVolume(bridge, "/etc/virtstation/tls"); s == "" {
		t.Errorf("the bridge serves no TLS Secret")
	} else if c := bySecret[s]; c == nil {
		t.Errorf("the bridge serves Secret %q, which no Certificate issues", s)
	} else if err := chainOK(c); err != nil {
		t.Errorf("bridge Certificate %s: %v", c.Name, err)
	} else if !slices.Contains(c.Spec.DNSNames, bridge.Name+"."+in.namespace+".svc") {
		t.Errorf("bridge Certificate %s: dnsNames %v lack its Service's", c.Name, c.Spec.DNSNames)
	}
}

// secretVolume returns the Secret mounted at path in d's first container.
func secretVolume(d *appsv1.Deployment, path string) string {
	pod := d.Spec.Template.Spec
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// checkSelfManagedCerts checks that, without cert-manager, the webhook is
// told to manage its certificates with names that match the installed
// objects and its RBAC, and that nothing of cert-manager is rendered.
func (in installation) checkSelfManagedCerts(t *testing.T, webhook *appsv1.Deployment, svc *corev1.Service) {
	t.Helper()
	for _, u := range in.objs {
		if strings.HasSuffix(u.GroupVersionKind().Group, "cert-manager.io") {
			t.Errorf("%s rendered without cert-manager", key(u))
		}
		if _, ok := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s: cert-manager annotation rendered without cert-manager", key(u))
		}
	}
	flags := map[string]string{}
	for _, a := range webhook.Spec.Template.Spec.Containers[0].Args {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	if flags["cert-mode"] != "self" {
		t.Errorf("webhook args %v: want --cert-mode=self", webhook.Spec.Template.Spec.Containers[0].Args)
	}
	if flags["webhook-service"] != svc.Name {
		t.Errorf("--webhook-service=%q, want the Service the webhooks call, %q", flags["webhook-service"], svc.Name)
	}
	for flag, kind := range map[string]string{"mutating-config": "MutatingWebhookConfiguration", "validating-config": "ValidatingWebhookConfiguration"} {
		if find(in.objs, kind, flags[flag]) == nil {
			t.Errorf("--%s=%q names no %s", flag, flags[flag], kind)
		}
	}
	// The RBAC of this mode names the same Secret and configurations.
	granted := map[string]bool{}
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, u := range ofKind(in.objs, kind) {
			for _, r := range convert[rbacv1.ClusterRole](t, u).Rules {
				for _, n := range r.ResourceNames {
					granted[n] = true
				}
			}
		}
	}
	for _, f := range []string{"cert-secret", "mutating-config", "validating-config"} {
		if flags[f] == "" || !granted[flags[f]] {
			t.Errorf("--%s=%q: no Role or ClusterRole grants access to it by name", f, flags[f])
		}
	}
	if flags["cert-dir"] == "" {
		t.Errorf("webhook args: no --cert-dir")
	}
	for _, m := range webhook.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == flags["cert-dir"] && m.ReadOnly {
			t.Errorf("the webhook's --cert-dir %s is mounted read-only; it writes its certificate there", m.MountPath)
		}
	}
}

// checkRBACSubjects checks that every binding refers to an installed role
// and ServiceAccount.
func (in installation) checkRBACSubjects(t *testing.T) {
	t.Helper()
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, u := range ofKind(in.objs, kind) {
			b := convert[rbacv1.RoleBinding](t, u)
			if r := find(in.objs, b.RoleRef.Kind, b.RoleRef.Name); r == nil || r.GetNamespace() != b.Namespace {
				t.Errorf("%s: roleRef %s %s is not installed next to it", key(u), b.RoleRef.Kind, b.RoleRef.Name)
			}
			for _, s := range b.Subjects {
				sa := find(in.objs, "ServiceAccount", s.Name)
				if s.Kind != rbacv1.ServiceAccountKind || sa == nil || sa.GetNamespace() != s.Namespace {
					t.Errorf("%s: subject %+v is not an installed ServiceAccount", key(u), s)
				}
			}
		}
	}
}
