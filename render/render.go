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
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	now, grace := opts.Now, opts.Grace
	if now.IsZero() {
		now = time.Now()
	}
	if grace <= 0 {
		grace = claims.DefaultGrace
	}
	// The enforcement modes, as the webhook's loader reads them.
	modes, err := auditModes(append(append([]Object(nil), opts.Cluster...), opts.Manifests...), ns)
	if err != nil {
		return nil, nil, err
	}
	// One view of the data disks for the mutation and the policies, as the
	// webhooks share one cache.
	lookup := disks.NewStatic()
	world := newDiskWorld(lookup, now, grace)
	// The mutation's view: VMs are added one by one as they exist (add),
	// so each admission costs the same however many came before.
	static := mutate.NewStaticCluster(nil)
	static.Static = lookup
	static.CollectKeys = func(s []corev1.Secret) []string { keys, _ := sshkeys.Collect(s); return keys }
	static.SetDefaultArchitecture(opts.DefaultArchitecture)
	existing := map[string]*kubevirtv1.VirtualMachine{}
	add := func(vm *kubevirtv1.VirtualMachine) {
		key := vm.Namespace + "/" + vm.Name
		existing[key] = vm
		world.setVM(vm)
		static.SetVM(vm)
	}
	for i, obj := range opts.Cluster {
		if err := world.add(obj, ns); err != nil {
			return nil, nil, fmt.Errorf("cluster object %d: %w", i+1, err)
		}
	}
	for i, obj := range opts.Manifests {
		if isVM(obj) {
			continue
		}
		if err := world.add(obj, ns); err != nil {
			return nil, nil, fmt.Errorf("manifest %d: %w", i+1, err)
		}
	}
	// Secrets and VMIs in the manifests count as existing for the VMs, as
	// when applied together (data disks did, through world.add).
	for i, obj := range append(append([]Object(nil), opts.Cluster...), opts.Manifests...) {
		if err := addState(static, obj, ns); err != nil {
			return nil, nil, fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	for i, obj := range opts.Cluster {
		if !isVM(obj) {
			continue
		}
		vm, err := typedVM(obj, ns)
		if err == nil && vm.Name == "" {
			err = errors.New("VirtualMachine has no metadata.name: objects in the cluster have one")
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cluster object %d: %w", i+1, err)
		}
		add(vm)
	}

	clusterVMs := indexVMs(opts.Cluster, ns)
	out := make([]Verdict, 0, len(opts.Manifests))
	for i, obj := range opts.Manifests {
		if !isVM(obj) {
			out = append(out, Verdict{Object: obj, Name: nameOf(obj)})
			continue
		}
		vm, err := typedVM(obj, ns)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %d: %w", i+1, err)
		}
		// generated is the name the API server gives a generateName VM
		// after the mutating webhooks, "" for a named VM.
		generated := ""
		if vm.Name == "" {
			switch {
			case vm.GenerateName == "":
				return nil, nil, fmt.Errorf("manifest %d: VirtualMachine has no metadata.name or generateName", i+1)
			case opts.GenerateNameSuffix == "":
				return nil, nil, fmt.Errorf("manifest %d: VirtualMachine has metadata.generateName %q and no name: pass --generate-name-suffix SUFFIX to preview it named %s<SUFFIX>, as the API server names it with 5 random characters", i+1, vm.GenerateName, GeneratedName(vm.GenerateName, ""))
			}
			generated = GeneratedName(vm.GenerateName, opts.GenerateNameSuffix)
			if errs := validation.IsDNS1123Subdomain(generated); len(errs) > 0 {
				return nil, nil, fmt.Errorf("manifest %d: generated name %q: %s", i+1, generated, strings.Join(errs, "; "))
			}
		}
		v := Verdict{Object: obj, Namespace: vm.Namespace, Name: cmp.Or(vm.Name, generated)}
		key := vm.Namespace + "/" + v.Name
		if vm.Labels[api.LabelManaged] != api.LabelTrue {
			if generated != "" {
				obj = withName(obj, generated)
				v.Object = obj
				vm = vm.DeepCopy()
				vm.Name = generated
			}
			// The objectSelector keeps it from the managed webhooks; only the
			// claim check for unmanaged VMs sees it.
			if opts.Policies != nil {
				denied, err := checkUnmanaged(ctx, world, obj, clusterVMs[key], vm.Namespace, vm.Name)
				if err != nil {
					return nil, nil, fmt.Errorf("manifest %d (%s): %w", i+1, key, err)
				}
				if len(denied) > 0 {
					v.Denied, v.Object = denied, nil
					out = append(out, v)
					continue
				}
			}
			out = append(out, v)
			add(vm)
			continue
		}
		v.Managed = true
		in := mutate.Input{Operation: admissionv1.Create, Namespace: vm.Namespace, Name: vm.Name, Object: withNamespace(obj, vm.Namespace), VM: vm, Now: time.Now()}
		if generated != "" {
			in.RequestUID = opts.GenerateNameSuffix
		}
		if old, ok := existing[key]; ok && generated == "" {
			in.Operation, in.OldVM = admissionv1.Update, old
		}
		res, err := mutate.Mutate(ctx, in, static)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %d (%s): %w", i+1, key, err)
		}
		v.Warnings, v.Denied = res.Warnings, res.Denied
		if len(res.Denied) > 0 {
			v.Object = nil
			out = append(out, v)
			continue
		}
		if generated != "" {
			// The API server names the object after the mutating webhooks.
			res.Object = withName(res.Object, generated)
		}
		v.Object = res.Object
		if opts.Policies != nil {
			var old Object
			if in.OldVM != nil {
				old = clusterVMs[key]
			}
			denied, warnings, err := evaluate(ctx, opts.Policies, modes, world, string(in.Operation), vm.Namespace, v.Name, res.Object, old)
			if err != nil {
				return nil, nil, fmt.Errorf("manifest %d (%s): %w", i+1, key, err)
			}
			v.Warnings = append(v.Warnings, warnings...)
			if len(denied) > 0 {
				v.Denied, v.Object = denied, nil
				out = append(out, v)
				continue
			}
		}
		admitted, err := typedVM(res.Object, vm.Namespace)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %d (%s): re-read mutated object: %w", i+1, key, err)
		}
		secrets, warnings, err := reconciledSecrets(ctx, static, admitted, existing)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest %d (%s): %w", i+1, key, err)
		}
		v.Secrets, v.Events = secrets, warnings
		add(admitted)
		out = append(out, v)
	}
	return out, world, nil
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
	_, vm, err := mutate.DecodeVM(b)
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
