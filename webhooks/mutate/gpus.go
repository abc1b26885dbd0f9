package mutate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// so a resource key as well would request the device twice. Both sources
// together ask for at most api.MaxGPUs GPUs, checked before any entry is
// made; the work is then linear in the length of gpus[].
func addGPUs(m *mutation) error {
	if m.released {
		releaseGPUs(m)
		return nil
	}
	fld := field.NewPath("metadata", "annotations").Key(api.AnnotationGPUs)
	reqs, errs := api.ParseGPUs(m.in.VM.Annotations[api.AnnotationGPUs], fld)
	if len(errs) > 0 {
		m.deny(errs, api.RuleGPUs, "use deviceName=count[,…], e.g. nvidia.com/GH100_H200=1")
		return nil
	}
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	moved, movedCount, values, ok := m.takeGPUResources()
	if !ok {
		return nil
	}
	total := 0
	for _, r := range reqs {
		total += r.Count
	}
	for _, n := range movedCount {
		total += n
	}
	if total > api.MaxGPUs {
		m.deny(field.ErrorList{field.TooMany(field.NewPath(pathGPUs[0], pathGPUs[1:]...), total, api.MaxGPUs)}, api.RuleGPUs,
			fmt.Sprintf("ask for at most %d GPUs in %s and the */gpu keys of domain.resources together", api.MaxGPUs, api.AnnotationGPUs))
		return nil
	}

	gpus := getList(m.obj, pathGPUs)
	ours := sets.New[string]()
	if m.prev.GPUs != nil {
		for _, g := range m.prev.GPUs.Added {
			ours.Insert(g.Name)
		}
	}
	hadOurs := ours.Len() > 0
	want := map[string]int{}
	devices := sets.New[string]()
	for _, r := range reqs {
		want[r.DeviceName] = r.Count
		devices.Insert(r.DeviceName)
	}
	// Entries an earlier admission made from a key that comes again (kubectl
	// apply sends the user's requests back) are that key's entries still.
	earlier := earlierMoves(m.prev.GPUs, gpus)
	// have counts every entry per device: the user's, ours, and the ones
	// the resource keys are about to add.
	have := map[string]int{}
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok {
			have[str(o["deviceName"])]++
		}
	}
	for k, n := range movedCount {
		have[k] += n - len(earlier[k].Entries)
	}
	gpus = dropSurplusGPUs(gpus, want, have, ours)

	namer := newGPUNamer(gpus, getList(m.obj, pathHostDevices))
	var records []api.MovedGPUResource
	surplus := sets.New[string]()
	for _, k := range moved {
		rec := values[k]
		reuse := earlier[k].Entries
		if n := movedCount[k]; len(reuse) > n {
			surplus.Insert(reuse[n:]...)
			reuse = reuse[:n]
		}
		rec.Entries = slices.Clone(reuse)
		for len(rec.Entries) < movedCount[k] {
			name := namer.next()
			gpus = append(gpus, map[string]any{"name": name, "deviceName": k})
			rec.Entries = append(rec.Entries, name)
		}
		records = append(records, rec)
	}
	if surplus.Len() > 0 {
		gpus = slices.DeleteFunc(gpus, func(g any) bool { return surplus.Has(gpuName(g)) })
	}
	for _, dev := range sets.List(devices) {
		for ; have[dev] < want[dev]; have[dev]++ {
			name := namer.next()
			gpus = append(gpus, map[string]any{"name": name, "deviceName": dev})
			ours.Insert(name)
		}
	}

	var added []api.InjectedGPU
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok && ours.Has(str(o["name"])) {
			added = append(added, api.InjectedGPU{Name: str(o["name"]), DeviceName: str(o["deviceName"])})
		}
	}
	// Earlier moves of keys that did not come again stay on record.
	for _, k := range sets.List(sets.KeySet(earlier)) {
		if _, again := movedCount[k]; !again {
			records = append(records, earlier[k])
		}
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Key < records[j].Key })
	if m.prev.GPUs != nil {
		moved = sets.List(sets.New(moved...).Insert(m.prev.GPUs.MovedResources...))
	}
	if len(added) > 0 || len(moved) > 0 {
		m.injected.GPUs = &api.InjectedGPUs{Added: added, MovedResources: moved, Moved: records}
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

// earlierMoves is the record's moves, by key, each keeping only the
// entries gpus still has for that key; a move that had entries and has none
// left is dropped (the user removed the GPUs). A key of 0 devices has none
// and stays.
func earlierMoves(prev *api.InjectedGPUs, gpus []any) map[string]api.MovedGPUResource {
	out := map[string]api.MovedGPUResource{}
	if prev == nil {
		return out
	}
	present := sets.New[string]()
	for _, g := range gpus {
		if o, ok := g.(map[string]any); ok {
			present.Insert(str(o["name"]) + "\x00" + str(o["deviceName"]))
		}
	}
	for _, mv := range prev.Moved {
		if _, dup := out[mv.Key]; dup || mv.Key == "" {
			continue
		}
		var entries []string
		for _, e := range mv.Entries {
			if present.Has(e + "\x00" + mv.Key) {
				entries = append(entries, e)
			}
		}
		if len(entries) > 0 || len(mv.Entries) == 0 {
			mv.Entries = entries
			out[mv.Key] = mv
		}
	}
	return out
}

// releaseGPUs undoes the record on a VM that left Virtstation's management:
// it removes the entries the annotation added and turns the entries made
// from resource keys back into those keys, with the values the user gave.
// A key the VM has again (the user put it back) keeps the user's value.
// Records written before MovedGPUResource name only the keys: their entries
// stay, with a warning, since nothing says which entries or how many.
func releaseGPUs(m *mutation) {
	prev := m.prev.GPUs
	if prev == nil || m.in.VM.Spec.Template == nil {
		return
	}
	gpus := getList(m.obj, pathGPUs)
	drop := sets.New[string]()
	for _, g := range prev.Added {
		drop.Insert(g.Name + "\x00" + g.DeviceName)
	}
	moves := earlierMoves(prev, gpus)
	for _, mv := range moves {
		for _, e := range mv.Entries {
			drop.Insert(e + "\x00" + mv.Key)
		}
	}
	kept := slices.DeleteFunc(slices.Clone(gpus), func(g any) bool {
		o, _ := g.(map[string]any)
		return drop.Has(str(o["name"]) + "\x00" + str(o["deviceName"]))
	})
	if len(kept) != len(gpus) {
		if len(kept) == 0 {
			unstructuredRemove(m.obj, pathGPUs)
		} else if err := setList(m.obj, kept, pathGPUs); err != nil {
			m.warnings = append(m.warnings, fmt.Sprintf("virtstation: GPUs not released: %v", err))
			return
		}
	}
	for _, k := range sets.List(sets.KeySet(moves)) {
		mv := moves[k]
		for part, raw := range map[string]json.RawMessage{"requests": mv.Request, "limits": mv.Limit} {
			if len(raw) == 0 {
				continue
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				m.warnings = append(m.warnings, fmt.Sprintf("virtstation: %s.%s[%s] not given back: the record's value does not parse: %v", strings.Join(pathResources, "."), part, k, err))
				continue
			}
			list, err := ensureObject(m.obj, append(slices.Clone(pathResources), part))
			if err != nil {
				m.warnings = append(m.warnings, fmt.Sprintf("virtstation: %s.%s[%s] not given back: %v", strings.Join(pathResources, "."), part, k, err))
				continue
			}
			if _, mine := list[k]; !mine && v != nil {
				list[k] = v
			}
		}
	}
	recorded := sets.New[string]()
	for _, mv := range prev.Moved {
		recorded.Insert(mv.Key)
	}
	for _, k := range prev.MovedResources {
		if !recorded.Has(k) {
			m.warnings = append(m.warnings, fmt.Sprintf(
				"virtstation: the gpus[] entries made from %s.*[%s] stay: this VM's record predates the one that says which entries they are; move them back to domain.resources yourself if you want the key",
				strings.Join(pathResources, "."), k))
		}
	}
}

// gpuName is the name of a gpus[] entry.
func gpuName(g any) string {
	o, _ := g.(map[string]any)
	return str(o["name"])
}

// dropSurplusGPUs removes the entries this webhook added (ours) for a
// device that has more than want, newest first, in one pass. Entries the
// user wrote are never removed. It updates have and ours.
func dropSurplusGPUs(gpus []any, want, have map[string]int, ours sets.Set[string]) []any {
	drop := make([]bool, len(gpus))
	dropped := false
	for i := len(gpus) - 1; i >= 0; i-- {
		o, ok := gpus[i].(map[string]any)
		if !ok || !ours.Has(str(o["name"])) {
			continue
		}
		if dev := str(o["deviceName"]); have[dev] > want[dev] {
			drop[i], dropped = true, true
			have[dev]--
			ours.Delete(str(o["name"]))
		}
	}
	if !dropped {
		return gpus
	}
	kept := make([]any, 0, len(gpus))
	for i, g := range gpus {
		if !drop[i] {
			kept = append(kept, g)
		}
	}
	return kept
}

// gpuNamer hands out the names gpu0, gpu1, … that no GPU or host device
// has (libvirt aliases must be unique): one set of taken names and one
// counter, so naming n entries is linear.
type gpuNamer struct {
	taken sets.Set[string]
	n     int
}

func newGPUNamer(gpus, hostDevices []any) *gpuNamer {
	return &gpuNamer{taken: names(gpus).Union(names(hostDevices))}
}

// next is the first free gpuN from the counter on.
func (g *gpuNamer) next() string {
	for {
		name := "gpu" + strconv.Itoa(g.n)
		g.n++
		if !g.taken.Has(name) {
			g.taken.Insert(name)
			return name
		}
	}
}

// takeGPUResources removes the `<vendor>/gpu` keys from domain.resources
// requests and limits and returns them, sorted, with how many gpus[]
// entries each becomes (the larger of request and limit). values holds what
// the user gave for each key: the record keeps it with the entries, so that
// releasing the VM turns them back into the key. Each value must be a whole number from 0 to
// api.MaxGPUs, and there are at most api.MaxGPUs such keys; ok is false when
// the admission is denied.
func (m *mutation) takeGPUResources() (keys []string, counts map[string]int, values map[string]api.MovedGPUResource, ok bool) {
	res, _ := getMap(m.obj, pathResources)
	if res == nil {
		return nil, nil, nil, true
	}
	fld := field.NewPath(pathResources[0], pathResources[1:]...)
	counts = map[string]int{}
	values = map[string]api.MovedGPUResource{}
	ok = true
	for _, part := range []string{"requests", "limits"} {
		list, _ := res[part].(map[string]any)
		for _, k := range sortedKeys(list) {
			if !strings.HasSuffix(k, "/gpu") {
				continue
			}
			v := list[k]
			n, err := gpuCount(v)
			if err != nil {
				m.deny(field.ErrorList{field.Invalid(fld.Child(part).Key(k), shortValue(v), err.Error())}, api.RuleGPUs,
					fmt.Sprintf("give a whole number of devices from 0 to %d, e.g. \"1\"", api.MaxGPUs))
				ok = false
				continue
			}
			raw, err := json.Marshal(v)
			if err != nil {
				// v was decoded from JSON, so it encodes; guard all the same.
				m.deny(field.ErrorList{field.Invalid(fld.Child(part).Key(k), shortValue(v), "not a JSON value")}, api.RuleGPUs, "give a number of devices, e.g. \"1\"")
				ok = false
				continue
			}
			rec := values[k]
			rec.Key = k
			if part == "requests" {
				rec.Request = raw
			} else {
				rec.Limit = raw
			}
			values[k] = rec
			counts[k] = max(counts[k], n)
			delete(list, k)
		}
		if list != nil && len(list) == 0 {
			delete(res, part)
		}
	}
	if len(counts) > api.MaxGPUs {
		m.deny(field.ErrorList{field.TooMany(fld, len(counts), api.MaxGPUs)}, api.RuleGPUs,
			fmt.Sprintf("use at most %d distinct */gpu resource keys", api.MaxGPUs))
		ok = false
	}
	if !ok {
		return nil, nil, nil, false
	}
	keys = make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, counts, values, true
}

// shortValue is v for a denial, or a placeholder when it is too long to
// repeat back.
func shortValue(v any) any {
	if s, ok := v.(string); ok && len(s) > 64 {
		return "<value omitted>"
	}
	return v
}

// maxGPUQuantity is api.MaxGPUs as a quantity.
var maxGPUQuantity = *resource.NewQuantity(api.MaxGPUs, resource.DecimalSI)

// gpuCount reads a `*/gpu` resource value as a number of devices: a
// quantity that is a whole number from 0 to api.MaxGPUs. The range is
// checked on the quantity itself, so a value such as 1e9 costs nothing.
func gpuCount(v any) (int, error) {
	q, err := resource.ParseQuantity(fmt.Sprint(v))
	if err != nil {
		return 0, errors.New("not a quantity")
	}
	if q.Sign() < 0 || q.Cmp(maxGPUQuantity) > 0 {
		return 0, fmt.Errorf("must be from 0 to %d devices", api.MaxGPUs)
	}
	n := q.Value()
	if q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0 {
		return 0, errors.New("must be a whole number of devices")
	}
	return int(n), nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
