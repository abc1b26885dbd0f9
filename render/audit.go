package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// Audit is the webhook's policy audit, offline: it evaluates every managed
// VM of the world the objects describe (opts.Cluster, then opts.Manifests
// admitted onto it in order as Render admits them; denied manifests are
// not in it) against opts.Policies, each as an UPDATE of the VM onto
// itself, with the disks' claims as the admissions left them. Rule modes
// come from a ConfigMap named policy.ModesConfigMapName among the
// objects (the last one wins); without one every rule denies.
//
// It returns the reports, sorted by namespace: one per namespace with
// managed VMs (more when the results are large), each result stamped
// opts.Now. Render's own verdicts (denials, warnings) are not returned;
// call Render for them.
func Audit(ctx context.Context, opts Options) ([]policyreport.Report, error) {
	if opts.Policies == nil {
		return nil, errors.New("audit needs the policies (Options.Policies)")
	}
	if opts.Now.IsZero() {
		// One time for the claims render judges and the results' stamps.
		opts.Now = time.Now()
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	modes, err := auditModes(append(append([]Object(nil), opts.Cluster...), opts.Manifests...), ns)
	if err != nil {
		return nil, err
	}
	verdicts, world, err := render(ctx, opts)
	if err != nil {
		return nil, err
	}
	rules := opts.Policies.Rules()
	byNamespace := map[string][]policyreport.Result{}
	for _, vm := range auditedVMs(opts.Cluster, verdicts, ns) {
		results, err := auditVM(ctx, opts.Policies, world, vm, rules, modes)
		if err != nil {
			return nil, fmt.Errorf("audit VirtualMachine %s/%s: %w", vm.namespace, vm.name, err)
		}
		byNamespace[vm.namespace] = append(byNamespace[vm.namespace], results...)
	}
	namespaces := make([]string, 0, len(byNamespace))
	for n := range byNamespace {
		namespaces = append(namespaces, n)
	}
	sort.Strings(namespaces)
	var out []policyreport.Report
	for _, n := range namespaces {
		results := byNamespace[n]
		policyreport.Stamp(results, nil, opts.Now)
		out = append(out, policyreport.Build(n, results)...)
	}
	return out, nil
}

// auditedVM is one managed VM of the world.
type auditedVM struct {
	namespace, name string
	uid             types.UID
	object          Object
}

// auditedVMs are the managed VMs that exist once the admitted manifests
// are applied onto the cluster: a cluster VM replaced by a manifest of the
// same namespace and name is the manifest's, with the cluster VM's UID
// (an UPDATE keeps it).
func auditedVMs(cluster []Object, verdicts []Verdict, ns string) []auditedVM {
	var order []string
	byKey := map[string]auditedVM{}
	put := func(vm auditedVM) {
		key := vm.namespace + "/" + vm.name
		old, ok := byKey[key]
		if !ok {
			order = append(order, key)
		}
		if vm.uid == "" && ok {
			vm.uid = old.uid
		}
		byKey[key] = vm
	}
	for _, obj := range cluster {
		if !isVM(obj) {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		n := u.GetNamespace()
		if n == "" {
			n = ns
		}
		put(auditedVM{namespace: n, name: u.GetName(), uid: u.GetUID(), object: withNamespace(obj, n)})
	}
	for _, v := range verdicts {
		if v.Object == nil || !isVM(v.Object) {
			continue
		}
		u := &unstructured.Unstructured{Object: v.Object}
		put(auditedVM{namespace: v.Namespace, name: v.Name, uid: u.GetUID(), object: withNamespace(v.Object, v.Namespace)})
	}
	out := make([]auditedVM, 0, len(order))
	for _, key := range order {
		vm := byKey[key]
		labels := (&unstructured.Unstructured{Object: vm.object}).GetLabels()
		if labels[api.LabelManaged] == api.LabelTrue {
			out = append(out, vm)
		}
	}
	return out
}

// auditVM evaluates one VM as the webhook's audit does (webhooks/audit
// AuditRequest and evaluateVM) and returns its result for each rule; an
// evaluation that fails (past the deadline: with the webhook's deadline
// denial as the message) is an error result for every rule.
func auditVM(ctx context.Context, engine *validate.Engine, w *diskWorld, vm auditedVM, rules []string, modes policy.Modes) ([]policyreport.Result, error) {
	raw, err := json.Marshal(vm.object)
	if err != nil {
		return nil, err
	}
	r, err := validate.DecodeRequest("UPDATE", vm.namespace, vm.name, raw, raw, nil)
	if err != nil {
		return nil, err
	}
	targets := validate.ClaimTargets(r.DataDisks(), r.VolumeDisks())
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	states, _, err := w.states(ctx, vm.namespace, vm.name, names)
	if err != nil {
		return nil, err
	}
	d, err := engine.EvaluateRequest(ctx, r, states)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	return policyreport.FromEvaluation(policyreport.VMRef(vm.namespace, vm.name, vm.uid), rules, d, err, modes, engine.Revision()), nil
}

// auditModes reads the rule modes from the last ConfigMap named
// policy.ModesConfigMapName among objs; none means every rule denies.
func auditModes(objs []Object, ns string) (policy.Modes, error) {
	var found *unstructured.Unstructured
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		if u.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "ConfigMap"}) && u.GetName() == policy.ModesConfigMapName {
			found = u
		}
	}
	if found == nil {
		return policy.Modes{}, nil
	}
	data, _, err := unstructured.NestedStringMap(found.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: data: %w", namespaceOr(found.GetNamespace(), ns), found.GetName(), err)
	}
	modes, err := policy.ParseModes(data)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", namespaceOr(found.GetNamespace(), ns), found.GetName(), err)
	}
	return modes, nil
}

func namespaceOr(n, def string) string {
	if n == "" {
		return def
	}
	return n
}
