package envtest_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// TestKubectlShortNames resolves the names kubectl users type, the way
// kubectl resolves them (discovery and its shortcut expander), against the
// CRDs the tests and the demo install: `kubectl get vm`, `vmi`, `dv`,
// `kv` and the instancetype names work as on a cluster KubeVirt's operator
// installed.
func TestKubectlShortNames(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	for short, want := range map[string]string{
		"vm":   "virtualmachines.kubevirt.io",
		"vms":  "virtualmachines.kubevirt.io",
		"vmi":  "virtualmachineinstances.kubevirt.io",
		"kv":   "kubevirts.kubevirt.io",
		"dv":   "datavolumes.cdi.kubevirt.io",
		"vmf":  "virtualmachineinstancetypes.instancetype.kubevirt.io",
		"vmcf": "virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
		"vmp":  "virtualmachinepreferences.instancetype.kubevirt.io",
		"vmcp": "virtualmachineclusterpreferences.instancetype.kubevirt.io",
	} {
		gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: short})
		if err != nil {
			t.Errorf("kubectl get %s: %v", short, err)
			continue
		}
		if got := gvr.GroupResource().String(); got != want {
			t.Errorf("kubectl get %s resolves to %s, want %s", short, got, want)
		}
	}
	// `kubectl get all` lists VMs and VMIs, as KubeVirt's categories say.
	resources, err := restmapper.GetAPIGroupResources(cached)
	if err != nil {
		t.Fatal(err)
	}
	inAll := map[string]bool{}
	for _, g := range resources {
		for _, rs := range g.VersionedResources {
			for _, r := range rs {
				for _, c := range r.Categories {
					if c == "all" {
						inAll[r.Name] = true
					}
				}
			}
		}
	}
	for _, r := range []string{"virtualmachines", "virtualmachineinstances"} {
		if !inAll[r] {
			t.Errorf("kubectl get all does not list %s", r)
		}
	}
}
