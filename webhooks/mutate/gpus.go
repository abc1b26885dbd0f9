package mutate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

var (
	pathGPUs      = []string{"spec", "template", "spec", "domain", "devices", "gpus"}
	pathResources = []string{"spec", "template", "spec", "domain", "resources"}
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
		m.deny(errs, policy.RuleGPUs, "use deviceName=count[,…], e.g. nvidia.com/GH100_H200=1")
		return nil
	}
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	moved, ok := m.takeGPUResources()
	if !ok {
		return nil
	}
	total := moved.total()
	for _, r := range reqs {
		total += r.Count
	}
	if total > api.MaxGPUs {
		m.deny(field.ErrorList{field.TooMany(field.NewPath(pathGPUs[0], pathGPUs[1:]...), total, api.MaxGPUs)}, policy.RuleGPUs,
			fmt.Sprintf("ask for at most %d GPUs in %s and the */gpu keys of domain.resources together", api.MaxGPUs, api.AnnotationGPUs))
		return nil
	}
	devices := &m.vm.Spec.Template.Spec.Domain.Devices
	p := newGPUPlan(m.prev.GPUs, devices.GPUs, reqs, moved)
	p.moveKeys(moved, devices.HostDevices)
	p.addRequested()
	if rec := p.record(m.prev.GPUs, moved); rec != nil {
		m.injected.GPUs = rec
	}
	devices.GPUs = p.gpus
	return nil
}

// movedKeys are the `*/gpu` keys takeGPUResources took from
// domain.resources: sorted, with how many gpus[] entries each becomes and
// the values the user gave.
type movedKeys struct {
	keys   []string
	counts map[string]int
	values map[string]api.MovedGPUResource
}

func (mv movedKeys) total() int {
	n := 0
	for _, c := range mv.counts {
		n += c
	}
	return n
}

// gpuPlan is gpus[] being brought in line with the annotation and the
// moved keys.
type gpuPlan struct {
	gpus []kubevirtv1.GPU
	// ours are the entries the annotation made.
	ours    sets.Set[string]
	hadOurs bool
	// want and have count entries per device: wanted by the annotation,
	// and there (the user's, ours, and those the moved keys are about to
	// add).
	want, have map[string]int
	devices    sets.Set[string]
	// earlier are the moves an earlier admission made (earlierMoves).
	earlier map[string]api.MovedGPUResource
	records []api.MovedGPUResource
	namer   *gpuNamer
}

func newGPUPlan(prev *api.InjectedGPUs, gpus []kubevirtv1.GPU, reqs []api.GPURequest, moved movedKeys) *gpuPlan {
	p := &gpuPlan{ours: sets.New[string](), want: map[string]int{}, have: map[string]int{}, devices: sets.New[string]()}
	if prev != nil {
		for _, g := range prev.Added {
			p.ours.Insert(g.Name)
		}
	}
	p.hadOurs = p.ours.Len() > 0
	for _, r := range reqs {
		p.want[r.DeviceName] = r.Count
		p.devices.Insert(r.DeviceName)
	}
	// Entries an earlier admission made from a key that comes again (kubectl
	// apply sends the user's requests back) are that key's entries still.
	p.earlier = earlierMoves(prev, gpus)
	for _, g := range gpus {
		p.have[g.DeviceName]++
	}
	for k, n := range moved.counts {
		p.have[k] += n - len(p.earlier[k].Entries)
	}
	p.gpus = dropSurplusGPUs(gpus, p.want, p.have, p.ours)
	return p
}

// moveKeys gives each moved key its entries: those an earlier admission
// made for it, then new ones; surplus earlier entries go.
func (p *gpuPlan) moveKeys(moved movedKeys, hostDevices []kubevirtv1.HostDevice) {
	p.namer = newGPUNamer(p.gpus, hostDevices)
	surplus := sets.New[string]()
	for _, k := range moved.keys {
		rec := moved.values[k]
		reuse := p.earlier[k].Entries
		if n := moved.counts[k]; len(reuse) > n {
			surplus.Insert(reuse[n:]...)
			reuse = reuse[:n]
		}
		rec.Entries = slices.Clone(reuse)
		for len(rec.Entries) < moved.counts[k] {
			name := p.namer.next()
			p.gpus = append(p.gpus, kubevirtv1.GPU{Name: name, DeviceName: k})
			rec.Entries = append(rec.Entries, name)
		}
		p.records = append(p.records, rec)
	}
	if surplus.Len() > 0 {
		p.gpus = slices.DeleteFunc(p.gpus, func(g kubevirtv1.GPU) bool { return surplus.Has(g.Name) })
	}
}

// addRequested adds the entries the annotation asks for and gpus[] lacks.
func (p *gpuPlan) addRequested() {
	for _, dev := range sets.List(p.devices) {
		for ; p.have[dev] < p.want[dev]; p.have[dev]++ {
			name := p.namer.next()
			p.gpus = append(p.gpus, kubevirtv1.GPU{Name: name, DeviceName: dev})
			p.ours.Insert(name)
		}
	}
}

// record is what the plan did, nil for nothing.
func (p *gpuPlan) record(prev *api.InjectedGPUs, moved movedKeys) *api.InjectedGPUs {
	var added []api.InjectedGPU
	for _, g := range p.gpus {
		if p.ours.Has(g.Name) {
			added = append(added, api.InjectedGPU{Name: g.Name, DeviceName: g.DeviceName})
		}
	}
	// Earlier moves of keys that did not come again stay on record.
	records := p.records
	for _, k := range sets.List(sets.KeySet(p.earlier)) {
		if _, again := moved.counts[k]; !again {
			records = append(records, p.earlier[k])
		}
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Key < records[j].Key })
	keys := moved.keys
	if prev != nil {
		keys = sets.List(sets.New(keys...).Insert(prev.MovedResources...))
	}
	if len(added) == 0 && len(keys) == 0 {
		return nil
	}
	return &api.InjectedGPUs{Added: added, MovedResources: keys, Moved: records}
}

// earlierMoves is the record's moves, by key, each keeping only the
// entries gpus still has for that key; a move that had entries and has none
// left is dropped (the user removed the GPUs). A key of 0 devices has none
// and stays.
func earlierMoves(prev *api.InjectedGPUs, gpus []kubevirtv1.GPU) map[string]api.MovedGPUResource {
	out := map[string]api.MovedGPUResource{}
	if prev == nil {
		return out
	}
	present := sets.New[string]()
	for _, g := range gpus {
		present.Insert(g.Name + "\x00" + g.DeviceName)
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
	devices := &m.vm.Spec.Template.Spec.Domain.Devices
	drop := sets.New[string]()
	for _, g := range prev.Added {
		drop.Insert(g.Name + "\x00" + g.DeviceName)
	}
	moves := earlierMoves(prev, devices.GPUs)
	for _, mv := range moves {
		for _, e := range mv.Entries {
			drop.Insert(e + "\x00" + mv.Key)
		}
	}
	devices.GPUs = slices.DeleteFunc(devices.GPUs, func(g kubevirtv1.GPU) bool { return drop.Has(g.Name + "\x00" + g.DeviceName) })
	if len(devices.GPUs) == 0 {
		devices.GPUs = nil
	}
	for _, k := range sets.List(sets.KeySet(moves)) {
		m.giveBackGPUKey(moves[k])
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

// giveBackGPUKey puts a moved key back in domain.resources with the
// values the user gave, unless the user put the key back.
func (m *mutation) giveBackGPUKey(mv api.MovedGPUResource) {
	res := &m.vm.Spec.Template.Spec.Domain.Resources
	for _, part := range []struct {
		name string
		raw  json.RawMessage
		list *corev1.ResourceList
	}{{"limits", mv.Limit, &res.Limits}, {"requests", mv.Request, &res.Requests}} {
		if len(part.raw) == 0 || string(part.raw) == "null" {
			continue
		}
		var q resource.Quantity
		if err := json.Unmarshal(part.raw, &q); err != nil {
			m.warnings = append(m.warnings, fmt.Sprintf("virtstation: %s.%s[%s] not given back: the record's value does not parse: %v", strings.Join(pathResources, "."), part.name, mv.Key, err))
			continue
		}
		if *part.list == nil {
			*part.list = corev1.ResourceList{}
		}
		if _, mine := (*part.list)[corev1.ResourceName(mv.Key)]; !mine {
			(*part.list)[corev1.ResourceName(mv.Key)] = q
		}
	}
}

// dropSurplusGPUs removes the entries this webhook added (ours) for a
// device that has more than want, newest first, in one pass. Entries the
// user wrote are never removed. It updates have and ours.
func dropSurplusGPUs(gpus []kubevirtv1.GPU, want, have map[string]int, ours sets.Set[string]) []kubevirtv1.GPU {
	drop := make([]bool, len(gpus))
	dropped := false
	for i := len(gpus) - 1; i >= 0; i-- {
		g := gpus[i]
		if !ours.Has(g.Name) {
			continue
		}
		if have[g.DeviceName] > want[g.DeviceName] {
			drop[i], dropped = true, true
			have[g.DeviceName]--
			ours.Delete(g.Name)
		}
	}
	if !dropped {
		return gpus
	}
	kept := make([]kubevirtv1.GPU, 0, len(gpus))
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

func newGPUNamer(gpus []kubevirtv1.GPU, hostDevices []kubevirtv1.HostDevice) *gpuNamer {
	taken := sets.New[string]()
	for _, g := range gpus {
		taken.Insert(g.Name)
	}
	for _, h := range hostDevices {
		taken.Insert(h.Name)
	}
	taken.Delete("")
	return &gpuNamer{taken: taken}
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
// requests and limits and returns them (movedKeys). The values are read
// as the user wrote them, from the request's object: the record keeps
// them with the entries, so that releasing the VM turns them back into
// the key, and denials quote them. Each value must be a whole number from
// 0 to api.MaxGPUs, and there are at most api.MaxGPUs such keys; ok is
// false when the admission is denied.
func (m *mutation) takeGPUResources() (movedKeys, bool) {
	res := &m.vm.Spec.Template.Spec.Domain.Resources
	if !hasGPUKey(res.Requests) && !hasGPUKey(res.Limits) {
		return movedKeys{}, true
	}
	written, _ := rawValue(m.in.Object, pathResources...).(map[string]any)
	fld := field.NewPath(pathResources[0], pathResources[1:]...)
	mv := movedKeys{counts: map[string]int{}, values: map[string]api.MovedGPUResource{}}
	ok := true
	for _, part := range []struct {
		name string
		list *corev1.ResourceList
	}{{"requests", &res.Requests}, {"limits", &res.Limits}} {
		values, _ := written[part.name].(map[string]any)
		for _, k := range sortedKeys(*part.list) {
			if !strings.HasSuffix(k, "/gpu") {
				continue
			}
			if !m.takeGPUKey(mv, part.name, k, values[k], fld) {
				ok = false
			}
			delete(*part.list, corev1.ResourceName(k))
		}
		if len(*part.list) == 0 {
			*part.list = nil
		}
	}
	if len(mv.counts) > api.MaxGPUs {
		m.deny(field.ErrorList{field.TooMany(fld, len(mv.counts), api.MaxGPUs)}, policy.RuleGPUs,
			fmt.Sprintf("use at most %d distinct */gpu resource keys", api.MaxGPUs))
		ok = false
	}
	if !ok {
		return movedKeys{}, false
	}
	mv.keys = sortedKeys(mv.counts)
	return mv, true
}

// takeGPUKey records one `*/gpu` key of part (requests or limits) with the
// value v the user wrote; false when it is denied.
func (m *mutation) takeGPUKey(mv movedKeys, part, k string, v any, fld *field.Path) bool {
	n, err := gpuCount(v)
	if err != nil {
		m.deny(field.ErrorList{field.Invalid(fld.Child(part).Key(k), shortValue(v), err.Error())}, policy.RuleGPUs,
			fmt.Sprintf("give a whole number of devices from 0 to %d, e.g. \"1\"", api.MaxGPUs))
		return false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		// v was decoded from JSON, so it encodes; guard all the same.
		m.deny(field.ErrorList{field.Invalid(fld.Child(part).Key(k), shortValue(v), "not a JSON value")}, policy.RuleGPUs, "give a number of devices, e.g. \"1\"")
		return false
	}
	rec := mv.values[k]
	rec.Key = k
	if part == "requests" {
		rec.Request = raw
	} else {
		rec.Limit = raw
	}
	mv.values[k] = rec
	mv.counts[k] = max(mv.counts[k], n)
	return true
}

func hasGPUKey(l corev1.ResourceList) bool {
	for k := range l {
		if strings.HasSuffix(string(k), "/gpu") {
			return true
		}
	}
	return false
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
