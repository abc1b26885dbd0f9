package envtest_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/webhooks/audit"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// ownerPolicy is an operator rule stricter than the shipped ones: a VM of
// namespace ns must name its owner. It fires only in ns, so the other
// tests' VMs stay admissible.
func ownerPolicy(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "owner-required-" + ns, Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data: map[string]string{
			"owner_required.rego": `package virtstation.rules.owner_required

rule_id := "owner-required"

deny contains {"id": rule_id, "field": "metadata.annotations[example.com/owner]", "message": msg} if {
	input.namespace == "` + ns + `"
	not input.object.metadata.annotations["example.com/owner"]
	msg := sprintf("VM %s names no owner (rule: owner-required; fix: set the annotation example.com/owner to the team that runs it)", [input.name])
}
`,
			"owner_required_test.rego": `package virtstation.rules.owner_required_test

import data.virtstation.rules.owner_required

test_no_owner_denied if {
	count(owner_required.deny) == 1 with input as {"namespace": "` + ns + `", "name": "x", "object": {"metadata": {}}}
}

test_owner_admitted if {
	count(owner_required.deny) == 0 with input as {"namespace": "` + ns + `", "name": "x", "object": {"metadata": {"annotations": {"example.com/owner": "team-a"}}}}
}
`,
		},
	}
}

// TestPolicyAudit (issue 18): a stricter policy applied while violating VMs
// exist shows up, in one write, in the namespace's PolicyReport with the
// webhook's own messages; warn and dryrun modes fill the report too; a
// fixed VM passes again and a deleted one leaves the report, each with its
// Event; resyncs with nothing new write nothing; relaxing the policy clears
// its results.
func TestPolicyAudit(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "audit")
	owner := withAnnotation("example.com/owner", "team-a")
	for name, opts := range map[string][]vmOption{"ws-owned": {managed, owner}, "ws-bob": {managed}, "ws-carol": {managed}} {
		if err := env.Client.Create(ctx, newVM(ns, name, opts...)); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	shipped := []string{policy.RuleDiskClaim, "mount-path", "shared-memory"}

	// Every VM passes the shipped rules.
	rep, gen := waitReport(t, ns, func(r policyreport.Report) error {
		return wantResults(r, map[string]string{"ws-owned": "pass", "ws-bob": "pass", "ws-carol": "pass"}, shipped, "")
	})
	if rep.Summary.Pass != 9 || rep.Summary.Fail != 0 {
		t.Errorf("summary %+v, want 9 pass", rep.Summary)
	}

	// A stricter policy: one reconcile names exactly the violating VMs.
	policy := ownerPolicy(ns)
	if err := env.Client.Create(ctx, policy); err != nil {
		t.Fatalf("apply the stricter policy: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), policy) })
	rep, gen2 := waitReport(t, ns, func(r policyreport.Report) error {
		return wantResults(r, map[string]string{"ws-owned": "pass", "ws-bob": "fail", "ws-carol": "fail"}, shipped, "owner-required")
	})
	if gen2 != gen+1 {
		t.Errorf("the report took %d writes to show the new policy, want 1", gen2-gen)
	}
	bob := resultOf(rep, "ws-bob", "owner-required")
	if bob.Properties[policyreport.PropField] != "metadata.annotations[example.com/owner]" || bob.Properties[policyreport.PropMode] != "deny" {
		t.Errorf("ws-bob's result properties %v, want the field path and mode deny", bob.Properties)
	}
	// The message is the webhook's: a VM like ws-bob is denied with it.
	probe := newVM(ns, "ws-bob", managed)
	err := env.Client.Create(ctx, probe, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "metadata.annotations[example.com/owner]: Forbidden: "+bob.Description) {
		t.Errorf("the webhook's denial %v does not carry the report's message %q", err, bob.Description)
	}
	for _, vm := range []string{"ws-bob", "ws-carol"} {
		eventually(t, 20*time.Second, func() error {
			return hasEvent(t, ns, vm, audit.ReasonPolicyViolation, "owner-required")
		})
	}

	// Warn and dryrun modes fill the report too.
	t.Cleanup(func() { setModes(t, map[string]string{}) })
	for mode, result := range map[string]string{"warn": "warn", "dryrun": "fail"} {
		setModes(t, map[string]string{"owner-required": mode})
		waitReport(t, ns, func(r policyreport.Report) error {
			if err := wantResults(r, map[string]string{"ws-owned": "pass", "ws-bob": result, "ws-carol": result}, shipped, "owner-required"); err != nil {
				return err
			}
			if m := resultOf(r, "ws-carol", "owner-required").Properties[policyreport.PropMode]; m != mode {
				return fmt.Errorf("ws-carol's mode property is %q, want %s", m, mode)
			}
			return nil
		})
	}
	setModes(t, map[string]string{})

	// Fixing a VM turns its result to pass; deleting one removes its results.
	var vm = newVM(ns, "ws-bob")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	owner(vm)
	if err := env.Client.Update(ctx, vm); err != nil {
		t.Fatalf("fix ws-bob: %v", err)
	}
	if err := env.Client.Delete(ctx, newVM(ns, "ws-carol")); err != nil {
		t.Fatal(err)
	}
	waitReport(t, ns, func(r policyreport.Report) error {
		return wantResults(r, map[string]string{"ws-owned": "pass", "ws-bob": "pass"}, shipped, "owner-required")
	})
	eventually(t, 20*time.Second, func() error { return hasEvent(t, ns, "ws-bob", audit.ReasonPolicyPassed, "owner-required") })

	// Resyncs with nothing new write nothing.
	audited := counter(t, "virtstation_audit_vms_audited_total")
	writes := reportWrites(t)
	time.Sleep(3 * testenv.AuditInterval)
	if got := counter(t, "virtstation_audit_vms_audited_total"); got < audited+2 {
		t.Fatalf("the audit did not resync: %v VMs audited before, %v after", audited, got)
	}
	if got := reportWrites(t); got != writes {
		t.Errorf("resyncs with nothing new wrote %v times to policyreports", got-writes)
	}

	// Relaxing the policy clears its results.
	if err := env.Client.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitReport(t, ns, func(r policyreport.Report) error {
		return wantResults(r, map[string]string{"ws-owned": "pass", "ws-bob": "pass"}, shipped, "")
	})
}

// waitReport waits until the namespace's PolicyReport passes check, and
// returns it with its generation (one per write of its content).
func waitReport(t *testing.T, ns string, check func(policyreport.Report) error) (policyreport.Report, int64) {
	t.Helper()
	var rep policyreport.Report
	var gen int64
	eventually(t, 30*time.Second, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyreport.WGPolicy)
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policyreport.ReportName}, u); err != nil {
			return err
		}
		r, err := policyreport.FromObject(u)
		if err != nil {
			return err
		}
		if u.GetLabels()[policyreport.LabelManagedBy] != policyreport.ManagedBy {
			return fmt.Errorf("report labels %v", u.GetLabels())
		}
		if err := check(r); err != nil {
			return err
		}
		rep, gen = r, u.GetGeneration()
		return nil
	})
	return rep, gen
}

// wantResults checks that the report holds exactly one result per VM of
// vms for each shipped rule (all pass) and, when extra is set, for extra
// (the VM's value in vms), and nothing else.
func wantResults(r policyreport.Report, vms map[string]string, shipped []string, extra string) error {
	var want, got []string
	for vm, result := range vms {
		for _, rule := range shipped {
			want = append(want, vm+" "+rule+" pass")
		}
		if extra != "" {
			want = append(want, vm+" "+extra+" "+result)
		}
	}
	for _, res := range r.Results {
		if res.Source != policyreport.Source || len(res.Subjects) != 1 || res.Subjects[0].Kind != "VirtualMachine" || res.Subjects[0].UID == "" {
			return fmt.Errorf("result %+v lacks its source or VM", res)
		}
		got = append(got, res.Subjects[0].Name+" "+res.Rule+" "+string(res.Result))
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		return fmt.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return nil
}

func resultOf(r policyreport.Report, vm, rule string) policyreport.Result {
	for _, res := range r.Results {
		if res.Subjects[0].Name == vm && res.Rule == rule {
			return res
		}
	}
	return policyreport.Result{}
}

func hasEvent(t *testing.T, ns, vm, reason, text string) error {
	t.Helper()
	for _, e := range eventsFor(t, ns, vm) {
		if e.Reason == reason && strings.Contains(e.Note, text) {
			return nil
		}
	}
	return fmt.Errorf("no %s Event on %s mentioning %s", reason, vm, text)
}

// counter reads a counter of this process's metrics registry.
func counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	return 0
}

// reportWrites counts the writes to policyreports the API server has
// served, from its own apiserver_request_total metric.
func reportWrites(t *testing.T) float64 {
	t.Helper()
	w, err := env.APIWrites(context.Background(), policyreport.WGPolicy.Group, "policyreports")
	if err != nil {
		t.Fatal(err)
	}
	return w.Count
}

// TestOpenReports: with --open-reports the audit writes the successor API,
// openreports.io/v1alpha1 Report, which the API server's own schema for it
// accepts, with the same results.
func TestOpenReports(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "openreports")
	if err := env.Client.Create(ctx, newVM(ns, "ws-dana", managed)); err != nil {
		t.Fatal(err)
	}
	engine := validate.NewEngine(0)
	if _, err := engine.Load(ctx, validate.ShippedModules()); err != nil {
		t.Fatal(err)
	}
	cache := env.Manager.GetCache()
	a := &audit.Auditor{
		Reader: cache, Client: env.Client, APIReader: env.Client,
		Engine: engine, Snapshots: validate.Snapshotter{Cache: cache, API: env.Client},
		Kinds: []schema.GroupVersionKind{policyreport.OpenReports},
	}
	eventually(t, 20*time.Second, func() error {
		if _, err := a.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}); err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyreport.OpenReports)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: policyreport.ReportName}, u); err != nil {
			return err
		}
		if src, _, _ := unstructured.NestedString(u.Object, "source"); src != policyreport.Source {
			return fmt.Errorf("report source %q", src)
		}
		r, err := policyreport.FromObject(u)
		if err != nil {
			return err
		}
		return wantResults(r, map[string]string{"ws-dana": "pass"}, []string{policy.RuleDiskClaim, "mount-path", "shared-memory"}, "")
	})
}
