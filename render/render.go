package render

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/webhooks/mutate"
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
}

// Verdict is the outcome for one manifest.
type Verdict struct {
	// Object is the admitted object; nil when denied.
	Object Object
	// Namespace and Name identify it.
	Namespace, Name string
	// Managed is true for a VirtualMachine the webhooks act on.
	Managed  bool
	Warnings []string
	Denied   field.ErrorList
}

// Render admits each manifest in order, as the API server would with the
// webhooks installed: later manifests see the VMs rendered before them.
func Render(ctx context.Context, opts Options) ([]Verdict, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	existing := map[string]*kubevirtv1.VirtualMachine{}
	var order []string
	add := func(vm *kubevirtv1.VirtualMachine) {
		key := vm.Namespace + "/" + vm.Name
		if _, ok := existing[key]; !ok {
			order = append(order, key)
		}
		existing[key] = vm
	}
	for i, obj := range opts.Cluster {
		if !isVM(obj) {
			continue
		}
		vm, err := typedVM(obj, ns)
		if err != nil {
			return nil, fmt.Errorf("cluster object %d: %w", i+1, err)
		}
		add(vm)
	}

	out := make([]Verdict, 0, len(opts.Manifests))
	for i, obj := range opts.Manifests {
		if !isVM(obj) {
			out = append(out, Verdict{Object: obj, Name: nameOf(obj)})
			continue
		}
		vm, err := typedVM(obj, ns)
		if err != nil {
			return nil, fmt.Errorf("manifest %d: %w", i+1, err)
		}
		v := Verdict{Object: obj, Namespace: vm.Namespace, Name: vm.Name}
		key := vm.Namespace + "/" + vm.Name
		if vm.Labels[api.LabelManaged] != api.LabelTrue {
			out = append(out, v) // the objectSelector keeps it from the webhook
			add(vm)
			continue
		}
		v.Managed = true
		in := mutate.Input{Operation: admissionv1.Create, Namespace: vm.Namespace, Name: vm.Name, Object: withNamespace(obj, vm.Namespace), VM: vm}
		if old, ok := existing[key]; ok {
			in.Operation, in.OldVM = admissionv1.Update, old
		}
		vms := make([]kubevirtv1.VirtualMachine, 0, len(order))
		for _, k := range order {
			vms = append(vms, *existing[k])
		}
		res, err := mutate.Mutate(ctx, in, mutate.NewStaticCluster(vms))
		if err != nil {
			return nil, fmt.Errorf("manifest %d (%s): %w", i+1, key, err)
		}
		v.Warnings, v.Denied = res.Warnings, res.Denied
		if len(res.Denied) > 0 {
			v.Object = nil
			out = append(out, v)
			continue
		}
		v.Object = res.Object
		admitted, err := typedVM(res.Object, vm.Namespace)
		if err != nil {
			return nil, fmt.Errorf("manifest %d (%s): re-read mutated object: %w", i+1, key, err)
		}
		add(admitted)
		out = append(out, v)
	}
	return out, nil
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
	if vm.Name == "" {
		return nil, fmt.Errorf("VirtualMachine has no metadata.name (generateName cannot be rendered offline)")
	}
	if vm.Namespace == "" {
		vm.Namespace = ns
	}
	return vm, nil
}

// withNamespace returns obj with metadata.namespace set, as the API server
// stores it.
func withNamespace(obj Object, ns string) Object {
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
	md["namespace"] = ns
	out["metadata"] = md
	return out
}
