package mutate

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// pathArchitecture is where a VM names its architecture.
var pathArchitecture = field.NewPath("spec", "template", "spec", "architecture")

// KubeVirtDefaultArchitecture is the architecture KubeVirt v1.9.0 gives a VM
// that names none, from the cluster's KubeVirt CRs, or "" when there is none
// or it names none.
//
// virt-api takes the CR's status.defaultArchitecture
// (pkg/virt-config/configuration.go, setConfigFromKubeVirt), which
// virt-operator sets from spec.configuration.architectureConfiguration.
// defaultArchitecture, else from its own GOARCH (pkg/virt-operator/util/
// config.go, SetDefaultArchitecture). Without an operator (a CR just applied,
// or a test control plane) the spec is the user's intent, so it comes next.
// KubeVirt runs one CR per cluster: with several, the oldest that is not
// being deleted counts.
func KubeVirtDefaultArchitecture(kvs []kubevirtv1.KubeVirt) string {
	live := make([]*kubevirtv1.KubeVirt, 0, len(kvs))
	for i := range kvs {
		if kvs[i].DeletionTimestamp == nil {
			live = append(live, &kvs[i])
		}
	}
	if len(live) == 0 {
		return ""
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	kv := live[0]
	if kv.Status.DefaultArchitecture != "" {
		return kv.Status.DefaultArchitecture
	}
	if c := kv.Spec.Configuration.ArchitectureConfiguration; c != nil {
		return c.DefaultArchitecture
	}
	return ""
}

// archState is what archOf resolved.
type archState struct {
	rules                           api.Arch
	name                            string
	resolved, known, fromVM, denied bool
}

// archOf resolves the architecture the VM runs on: its
// spec.template.spec.architecture, else the cluster's default, else
// api.DefaultArch. It asks the cluster at most once per mutation. ok is
// false when KubeVirt runs no VM on that architecture; the first step to
// ask (rule names it) then denies, once, saying where the name came from.
func (m *mutation) archOf(rule string) (api.Arch, bool, error) {
	a := &m.arch
	if !a.resolved {
		name, fromVM := "", false
		if t := m.in.VM.Spec.Template; t != nil && t.Spec.Architecture != "" {
			name, fromVM = t.Spec.Architecture, true
		} else {
			def, err := m.cluster.DefaultArchitecture(m.ctx)
			if err != nil {
				return api.Arch{}, false, fmt.Errorf("read the cluster's default architecture: %w", err)
			}
			name = def
		}
		if name == "" {
			name = api.DefaultArch
		}
		a.rules, a.known = api.LookupArch(name)
		a.name, a.fromVM, a.resolved = name, fromVM, true
	}
	if !a.known && !a.denied {
		a.denied = true
		e := field.NotSupported(pathArchitecture, a.name, api.Architectures)
		fix := "set spec.template.spec.architecture to one of these"
		if !a.fromVM {
			e.Detail = "the VM names no architecture, and the cluster's default (the KubeVirt CR's defaultArchitecture) is one KubeVirt v1.9.0 runs no VM on: " + e.Detail
			fix = "set spec.template.spec.architecture, or the KubeVirt CR's spec.configuration.architectureConfiguration.defaultArchitecture, to one of these"
		} else {
			e.Detail = "KubeVirt v1.9.0 runs no VM on this architecture, so Virtstation cannot choose its devices: " + e.Detail
		}
		m.deny(field.ErrorList{e}, rule, fix)
	}
	return a.rules, a.known, nil
}
