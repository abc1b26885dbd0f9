package mutate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

var (
	pathGPUs        = []string{"spec", "template", "spec", "domain", "devices", "gpus"}
	pathHostDevices = []string{"spec", "template", "spec", "domain", "devices", "hostDevices"}
	pathResources   = []string{"spec", "template", "spec", "domain", "resources"}
)

// addGPUs keeps gpus[] in line with virtstation.io/gpus and moves `*/gpu`
// resource keys into gpus[]: KubeVirt requests one device per gpus[] entry,
// so a resource key as well would request the device twice.
func addGPUs(m *mutation) error {
	fld := field.NewPath("metadata", "annotations").Key(api.AnnotationGPUs)
	reqs, errs := api.ParseGPUs(m.in.VM.Annotations[api.AnnotationGPUs], fld)
	if len(errs) > 0 {
		m.deny(errs, "gpus", "use deviceName=count[,…], e.g. nvidia.com/GH100_H200=1")
		return nil
	}
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	gpus := getList(m.obj, pathGPUs)
	moved, err := m.moveGPUResources(&gpus)
	if err != nil {
		return err
	}

	ours := sets.New[string]()
	if m.prev.GPUs != nil {
		for _, g := range m.prev.GPUs.Added {
			ours.Insert(g.Name)
		}
	}
	want := map[string]int{}
	devices := sets.New[string]()
	for _, r := range reqs {
		want[r.DeviceName] = r.Count
		devices.Insert(r.DeviceName)
	}
	// Entries this webhook added earlier for devices no longer listed go away.
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok && ours.Has(str(o["name"])) {
			devices.Insert(str(o["deviceName"]))
		}
	}
	hadOurs := ours.Len() > 0
	for _, dev := range sets.List(devices) {
		gpus = m.fitGPUCount(gpus, dev, want[dev], ours)
	}

	var added []InjectedGPU
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok && ours.Has(str(o["name"])) {
			added = append(added, InjectedGPU{Name: str(o["name"]), DeviceName: str(o["deviceName"])})
		}
	}
	if m.prev.GPUs != nil {
		moved = sets.List(sets.New(moved...).Insert(m.prev.GPUs.MovedResources...))
	}
	if len(added) > 0 || len(moved) > 0 {
		m.injected.GPUs = &InjectedGPUs{Added: added, MovedResources: moved}
	}
	if len(reqs) == 0 && len(moved) == 0 && !hadOurs {
		return nil
	}
	if len(gpus) == 0 {
		unstructuredRemove(m.obj, pathGPUs)
		return nil
	}
	return setList(m.obj, gpus, pathGPUs)
}

// fitGPUCount adds entries for dev until there are want, or removes entries
// this webhook added (ours) until there are no more than want. Entries the
// user wrote are never removed.
func (m *mutation) fitGPUCount(gpus []any, dev string, want int, ours sets.Set[string]) []any {
	have := 0
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok && str(o["deviceName"]) == dev {
			have++
		}
	}
	for ; have < want; have++ {
		name := m.freeGPUName(gpus)
		gpus = append(gpus, map[string]any{"name": name, "deviceName": dev})
		ours.Insert(name)
	}
	for i := len(gpus) - 1; i >= 0 && have > want; i-- {
		o, ok := gpus[i].(map[string]any)
		if ok && str(o["deviceName"]) == dev && ours.Has(str(o["name"])) {
			ours.Delete(str(o["name"]))
			gpus = append(gpus[:i], gpus[i+1:]...)
			have--
		}
	}
	return gpus
}

// freeGPUName is the first gpuN not used by a GPU or host device: libvirt
// aliases must be unique.
func (m *mutation) freeGPUName(gpus []any) string {
	used := names(gpus).Union(names(getList(m.obj, pathHostDevices)))
	for i := 0; ; i++ {
		if n := "gpu" + strconv.Itoa(i); !used.Has(n) {
			return n
		}
	}
}

// moveGPUResources removes `<vendor>/gpu` keys from domain.resources
// requests and limits and appends that many gpus[] entries (the larger of
// request and limit). The entries then belong to the user.
func (m *mutation) moveGPUResources(gpus *[]any) ([]string, error) {
	res, _ := getMap(m.obj, pathResources)
	if res == nil {
		return nil, nil
	}
	counts := map[string]int64{}
	for _, part := range []string{"requests", "limits"} {
		list, _ := res[part].(map[string]any)
		for k, v := range list {
			if !strings.HasSuffix(k, "/gpu") {
				continue
			}
			q, err := resource.ParseQuantity(fmt.Sprint(v))
			if err != nil {
				m.denied = append(m.denied, field.Invalid(field.NewPath("spec", "template", "spec", "domain", "resources", part).Key(k), v,
					"not a quantity (rule: gpus; fix: give a whole number of devices, e.g. \"1\")"))
				continue
			}
			counts[k] = max(counts[k], q.Value())
			delete(list, k)
		}
		if list != nil && len(list) == 0 {
			delete(res, part)
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for i := int64(0); i < counts[k]; i++ {
			*gpus = append(*gpus, map[string]any{"name": m.freeGPUName(*gpus), "deviceName": k})
		}
	}
	return keys, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
