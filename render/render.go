package render

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/disks"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// Options says what to render.
type Options struct {
	// Manifests are the objects a user would apply, in order.
	Manifests []Object
	// Cluster are the objects that already exist (other VMs, and later
	// DataVolumes, PVCs and Secrets). A manifest VM with the same namespace
	// and name as a cluster VM renders as an UPDATE of it.
	Cluster []Object
	// Namespace is used for objects that set none, as kubectl does.
	Namespace string
	// Policies, when set, judges each admitted VM as the validating webhook
	// does, with claims taken from the objects' annotations and from the VMs
	// rendered before it; unmanaged VMs get the claim check the webhook for
	// them makes.
	Policies *validate.Engine
	// Now is when claims are judged and written; zero means time.Now().
	Now time.Time
	// Grace is how long a claim holds before its VM exists; zero means
	// claims.DefaultGrace, the webhook's default.
	Grace time.Duration
	// DefaultArchitecture is the cluster's default architecture, which a
	// VM naming none runs on. Empty means that of a KubeVirt CR among the
	// objects, else amd64, as the webhook decides.
	DefaultArchitecture string
	// GenerateNameSuffix, when set, renders a manifest VM that has only
	// metadata.generateName as the API server would: the mutating webhook
	// sees no name (it derives the MAC from the prefix and the request UID,
	// for which render passes the suffix), and the admitted VM is named
	// GeneratedName(generateName, suffix), as validation sees it.
	GenerateNameSuffix string
}

// maxGeneratedNameLength is how much of generateName the API server keeps
// before its random suffix (k8s.io/apiserver/pkg/storage/names:
// maxNameLength 63 less randomLength 5).
const maxGeneratedNameLength = 63 - 5

// GeneratedName is the name the API server gives a VM with generateName
// prefix when its random suffix is suffix.
func GeneratedName(prefix, suffix string) string {
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength]
	}
	return prefix + suffix
}

// Verdict is the outcome for one manifest.
type Verdict struct {
	// Object is the admitted object; nil when denied.
	Object Object
	// Namespace and Name identify it.
	Namespace, Name string
	// Managed is true for a VirtualMachine the webhooks act on.
	Managed bool
	// Warnings are the admission's warnings, as the webhooks answer them.
	Warnings []string
	Denied   field.ErrorList
	// Secrets the reconcilers would write for the VM once stored (the
	// per-VM SSH keys and merged user-data Secrets).
	Secrets []Object
	// Events are the Warning Events the reconcilers would emit on the VM
	// once stored, instead of writing a Secret: the webhook cannot warn of
	// them, as it reads no Secret.
	Events []string
}

// Render admits each manifest in order, as the API server would with the
// webhooks installed: later manifests see the VMs rendered before them.
func Render(ctx context.Context, opts Options) ([]Verdict, error) {
	out, _, err := render(ctx, opts)
	return out, err
}

// render is Render, also returning the disk world the admissions left
// (claims written), which Audit evaluates the resulting VMs in.
func render(ctx context.Context, opts Options) ([]Verdict, *diskWorld, error) {
	r, err := newRenderer(opts)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Verdict, 0, len(opts.Manifests))
	for i, obj := range opts.Manifests {
		v, err := r.admit(ctx, obj)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %d%s: %w", i+1, v.key(), err)
		}
		out = append(out, v)
	}
	return out, r.world, nil
}

// renderer is the cluster as render sees it while it admits the manifests
// one by one.
type renderer struct {
	opts Options
	// ns is the namespace of objects that set none.
	ns    string
	modes policy.Modes
	// world is the disks and claims the policies see; static the cluster
	// the mutation reads. VMs join both as they are admitted (add), so each
	// admission costs the same however many came before.
	world  *diskWorld
	static *mutate.StaticCluster
	// existing are the VMs admitted or in the cluster, by "ns/name";
	// clusterVMs the cluster's VMs as given.
	existing   map[string]*kubevirtv1.VirtualMachine
	clusterVMs map[string]Object
}

// newRenderer loads the cluster objects, and the manifests that are not
// VMs, as the state the VMs are admitted into.
func newRenderer(opts Options) (*renderer, error) {
	r := &renderer{opts: opts, ns: cmp.Or(opts.Namespace, "default"), existing: map[string]*kubevirtv1.VirtualMachine{}}
	now, grace := opts.Now, claims.GraceOrDefault(opts.Grace)
	if now.IsZero() {
		now = time.Now()
	}
	all := append(append([]Object(nil), opts.Cluster...), opts.Manifests...)
	// The enforcement modes, as the webhook's loader reads them.
	var err error
	if r.modes, err = auditModes(all, r.ns); err != nil {
		return nil, err
	}
	// One view of the data disks for the mutation and the policies, as the
	// webhooks share one cache.
	lookup := disks.NewStatic()
	r.world = newDiskWorld(lookup, now, grace)
	r.static = mutate.NewStaticCluster(nil)
	r.static.Static = lookup
	r.static.CollectKeys = func(s []corev1.Secret) []string { keys, _ := sshkeys.Collect(s); return keys }
	r.static.SetDefaultArchitecture(opts.DefaultArchitecture)
	if err := r.loadState(); err != nil {
		return nil, err
	}
	r.clusterVMs = indexVMs(opts.Cluster, r.ns)
	return r, nil
}

// loadState adds the data disks, Secrets, VMIs and KubeVirt CRs among the
// objects, and the cluster's VMs.
func (r *renderer) loadState() error {
	for i, obj := range r.opts.Cluster {
		if err := r.world.add(obj, r.ns); err != nil {
			return fmt.Errorf("cluster object %d: %w", i+1, err)
		}
	}
	for i, obj := range r.opts.Manifests {
		if isVM(obj) {
			continue
		}
		if err := r.world.add(obj, r.ns); err != nil {
			return fmt.Errorf("manifest %d: %w", i+1, err)
		}
	}
	// Secrets and VMIs in the manifests count as existing for the VMs, as
	// when applied together (data disks did, through world.add).
	for i, obj := range append(append([]Object(nil), r.opts.Cluster...), r.opts.Manifests...) {
		if err := addState(r.static, obj, r.ns); err != nil {
			return fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	for i, obj := range r.opts.Cluster {
		if !isVM(obj) {
			continue
		}
		vm, err := typedVM(obj, r.ns)
		if err == nil && vm.Name == "" {
			err = errors.New("VirtualMachine has no metadata.name: objects in the cluster have one")
		}
		if err != nil {
			return fmt.Errorf("cluster object %d: %w", i+1, err)
		}
		r.add(vm)
	}
	return nil
}

// add makes vm exist for the admissions after it.
func (r *renderer) add(vm *kubevirtv1.VirtualMachine) {
	r.existing[vm.Namespace+"/"+vm.Name] = vm
	r.world.setVM(vm)
	r.static.SetVM(vm)
}

// key is " (ns/name)" for a VM's verdict, "" before it is known.
func (v Verdict) key() string {
	if v.Name == "" {
		return ""
	}
	return " (" + v.Namespace + "/" + v.Name + ")"
}

// admit admits one manifest as the API server would.
func (r *renderer) admit(ctx context.Context, obj Object) (Verdict, error) {
	if !isVM(obj) {
		return Verdict{Object: obj, Name: nameOf(obj)}, nil
	}
	vm, err := typedVM(obj, r.ns)
	if err != nil {
		return Verdict{}, err
	}
	// generated is the name the API server gives a generateName VM after
	// the mutating webhooks, "" for a named VM.
	generated, err := r.generatedName(vm)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Object: obj, Namespace: vm.Namespace, Name: cmp.Or(vm.Name, generated)}
	if vm.Labels[api.LabelManaged] != api.LabelTrue {
		return r.admitUnmanaged(ctx, v, vm, generated)
	}
	v.Managed = true
	return r.admitManaged(ctx, v, vm, generated)
}

// generatedName is the name of a VM that has only generateName, "" for a
// named one.
func (r *renderer) generatedName(vm *kubevirtv1.VirtualMachine) (string, error) {
	switch {
	case vm.Name != "":
		return "", nil
	case vm.GenerateName == "":
		return "", errors.New("VirtualMachine has no metadata.name or generateName")
	case r.opts.GenerateNameSuffix == "":
		return "", fmt.Errorf("VirtualMachine has metadata.generateName %q and no name: pass --generate-name-suffix SUFFIX to preview it named %s<SUFFIX>, as the API server names it with 5 random characters", vm.GenerateName, GeneratedName(vm.GenerateName, ""))
	}
	generated := GeneratedName(vm.GenerateName, r.opts.GenerateNameSuffix)
	if errs := validation.IsDNS1123Subdomain(generated); len(errs) > 0 {
		return "", fmt.Errorf("generated name %q: %s", generated, strings.Join(errs, "; "))
	}
	return generated, nil
}

// admitUnmanaged admits a VM without the managed label: the objectSelector
// keeps it from the managed webhooks; only the claim check for unmanaged
// VMs sees it.
func (r *renderer) admitUnmanaged(ctx context.Context, v Verdict, vm *kubevirtv1.VirtualMachine, generated string) (Verdict, error) {
	if generated != "" {
		v.Object = withName(v.Object, generated)
		vm = vm.DeepCopy()
		vm.Name = generated
	}
	if r.opts.Policies != nil {
		denied, err := checkUnmanaged(ctx, r.world, v.Object, r.clusterVMs[vm.Namespace+"/"+vm.Name], vm.Namespace, vm.Name)
		if err != nil {
			return v, err
		}
		if len(denied) > 0 {
			v.Denied, v.Object = denied, nil
			return v, nil
		}
	}
	r.add(vm)
	return v, nil
}

// admitManaged runs the mutating webhook's admission (mutate.Admit), then
// the validating webhook's policies, on a managed VM, and the reconcilers
// that write its Secrets once it is stored.
func (r *renderer) admitManaged(ctx context.Context, v Verdict, vm *kubevirtv1.VirtualMachine, generated string) (Verdict, error) {
	key := vm.Namespace + "/" + v.Name
	req, err := r.mutateRequest(v.Object, vm, generated)
	if err != nil {
		return v, err
	}
	out, err := mutate.Admit(ctx, req, r.static)
	if err != nil {
		return v, err
	}
	res := out.Result
	v.Warnings, v.Denied = res.Warnings, res.Denied
	if len(res.Denied) > 0 {
		v.Object = nil
		return v, nil
	}
	object, err := mutate.Patched(req.Object, res)
	if err != nil {
		return v, err
	}
	admitted := out.Input.VM
	if !out.Skipped {
		admitted = res.VM
	}
	if generated != "" {
		// The API server names the object after the mutating webhooks.
		object = withName(object, generated)
		admitted = admitted.DeepCopy()
		admitted.Name = generated
	}
	v.Object = object
	if r.opts.Policies != nil {
		var old Object
		if out.Input.OldVM != nil {
			old = r.clusterVMs[key]
		}
		denied, warnings, err := evaluate(ctx, r.opts.Policies, r.modes, r.world, string(req.Operation), vm.Namespace, v.Name, object, old)
		if err != nil {
			return v, err
		}
		v.Warnings = append(v.Warnings, warnings...)
		if len(denied) > 0 {
			v.Denied, v.Object = denied, nil
			return v, nil
		}
	}
	if v.Secrets, v.Events, err = reconciledSecrets(ctx, r.static, admitted, r.existing); err != nil {
		return v, err
	}
	r.add(admitted)
	return v, nil
}

// mutateRequest is the admission request the API server would send the
// mutating webhook for obj: an UPDATE of the VM of that name if one
// exists, with the request UID the generated name's suffix stands for.
func (r *renderer) mutateRequest(obj Object, vm *kubevirtv1.VirtualMachine, generated string) (mutate.Request, error) {
	raw, err := json.Marshal(withNamespace(obj, vm.Namespace))
	if err != nil {
		return mutate.Request{}, err
	}
	// The mutation's clock is the wall clock, as before Options.Now
	// (which dates claims) existed.
	req := mutate.Request{Operation: admissionv1.Create, Namespace: vm.Namespace, Name: vm.Name, Object: raw, Now: time.Now()}
	if generated != "" {
		req.UID = r.opts.GenerateNameSuffix
	}
	if old, ok := r.existing[vm.Namespace+"/"+vm.Name]; ok && generated == "" {
		if req.OldObject, err = json.Marshal(old); err != nil {
			return mutate.Request{}, err
		}
		req.Operation = admissionv1.Update
	}
	return req, nil
}

func isVM(obj Object) bool {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	return kind == "VirtualMachine" && (av == kubevirtv1.SchemeGroupVersion.String() || av == "kubevirt.io/v1alpha3")
}

func nameOf(obj Object) string {
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	return name
}

// typedVM decodes obj as the webhook does, defaulting its namespace.
func typedVM(obj Object, ns string) (*kubevirtv1.VirtualMachine, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	vm, err := mutate.DecodeVM(b)
	if err != nil {
		return nil, err
	}
	if vm.Namespace == "" {
		vm.Namespace = ns
	}
	return vm, nil
}

// withName returns obj with metadata.name set, as the API server names a
// generateName object.
func withName(obj Object, name string) Object { return withMetadata(obj, "name", name) }

// withNamespace returns obj with metadata.namespace set, as the API server
// stores it.
func withNamespace(obj Object, ns string) Object { return withMetadata(obj, "namespace", ns) }

// withMetadata returns a copy of obj, shallow but for metadata, with
// metadata[key] = value.
func withMetadata(obj Object, key, value string) Object {
	out := make(Object, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	md := map[string]any{}
	if m, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range m {
			md[k] = v
		}
	}
	md[key] = value
	out["metadata"] = md
	return out
}

// addState records a Secret, VMI, KubeVirt CR or lifecycle ConfigMap for
// the cluster view. Render knows no install namespace: a lifecycle
// ConfigMap gives the defaults of its own namespace only.
func addState(c *mutate.StaticCluster, obj Object, ns string) error {
	u := &unstructured.Unstructured{Object: obj}
	if u.GetNamespace() == "" {
		u = u.DeepCopy()
		u.SetNamespace(ns)
	}
	switch u.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachineInstance"}:
		c.AddVMI(u.GetNamespace(), u.GetName())
	case schema.GroupKind{Group: "kubevirt.io", Kind: "KubeVirt"}:
		var kv kubevirtv1.KubeVirt
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &kv); err != nil {
			return fmt.Errorf("decode KubeVirt %s: %w", u.GetName(), err)
		}
		c.AddKubeVirt(&kv)
	case schema.GroupKind{Kind: "ConfigMap"}:
		if u.GetName() != api.LifecycleConfigMap {
			return nil
		}
		data, _, err := unstructured.NestedStringMap(u.Object, "data")
		if err != nil {
			return fmt.Errorf("ConfigMap %s/%s: data: %w", u.GetNamespace(), u.GetName(), err)
		}
		c.AddLifecycleConfigMap(u.GetNamespace(), data)
	case schema.GroupKind{Kind: "Secret"}:
		var s corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
			return fmt.Errorf("decode Secret %s: %w", u.GetName(), err)
		}
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		c.AddSecret(&s)
	}
	return nil
}

// toObject converts a typed object to the generic form render prints.
func toObject(o runtime.Object) (Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// readableSecret moves UTF-8 data to stringData, which kubectl applies the
// same way, so rendered Secrets can be read and diffed.
func readableSecret(s *corev1.Secret) *corev1.Secret {
	out := s.DeepCopy()
	for k, v := range s.Data {
		if utf8.Valid(v) {
			if out.StringData == nil {
				out.StringData = map[string]string{}
			}
			out.StringData[k] = string(v)
			delete(out.Data, k)
		}
	}
	if len(out.Data) == 0 {
		out.Data = nil
	}
	return out
}

// indexVMs indexes the VMs among objs by "ns/name" (objects that set no
// namespace are in ns); the first of a key wins.
func indexVMs(objs []Object, ns string) map[string]Object {
	out := map[string]Object{}
	for _, o := range objs {
		if !isVM(o) {
			continue
		}
		u := &unstructured.Unstructured{Object: o}
		key := namespaceOr(u.GetNamespace(), ns) + "/" + u.GetName()
		if _, ok := out[key]; !ok {
			out[key] = o
		}
	}
	return out
}
