package render

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// policyTimeout bounds one offline evaluation.
const policyTimeout = 5 * time.Second

// diskWorld is the offline view of data disks and their claims, updated as
// render admits VMs in order, the way the validating webhook writes claims.
type diskWorld struct {
	disks map[string]*offlineDisk // "ns/name"
	vms   map[string]bool         // "ns/name" of VMs that exist
	vmis  map[string]bool
}

type offlineDisk struct {
	kind     string
	labelled bool
	state    claims.State
}

func newDiskWorld() *diskWorld {
	return &diskWorld{disks: map[string]*offlineDisk{}, vms: map[string]bool{}, vmis: map[string]bool{}}
}

// add records a DataVolume, PVC, VM or VMI from the objects.
func (w *diskWorld) add(obj Object, ns string) {
	u := &unstructured.Unstructured{Object: obj}
	if u.GetNamespace() == "" {
		u = u.DeepCopy()
		u.SetNamespace(ns)
	}
	key := u.GetNamespace() + "/" + u.GetName()
	switch u.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "DataVolume"}:
		w.disks[key] = &offlineDisk{kind: "DataVolume", labelled: u.GetLabels()[api.LabelDataDisk] == api.LabelTrue, state: claims.Read(u)}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		if d, ok := w.disks[key]; ok && d.kind == "DataVolume" {
			return // CDI's PVC belongs to its DataVolume
		}
		w.disks[key] = &offlineDisk{kind: "PersistentVolumeClaim", labelled: u.GetLabels()[api.LabelDataDisk] == api.LabelTrue, state: claims.Read(u)}
	case schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}:
		w.vms[key] = true
	case schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachineInstance"}:
		w.vmis[key] = true
	}
}

// states is the disk snapshot for VM self.
func (w *diskWorld) states(ns, self string, names []string) map[string]validate.DiskState {
	out := map[string]validate.DiskState{}
	live := func(claimant string) bool { return w.vms[claimant] || w.vmis[claimant] }
	for _, n := range names {
		d, ok := w.disks[ns+"/"+n]
		if !ok {
			out[n] = validate.DiskState{}
			continue
		}
		st := validate.DiskState{Exists: true, Kind: d.kind, Labelled: d.labelled}
		if c := d.state.ClaimedBy; c != "" && c != ns+"/"+self {
			st.ClaimedBy, st.ClaimLive = c, live(c)
		}
		for _, r := range d.state.SharedBy {
			if r != ns+"/"+self && live(r) {
				st.SharedBy = append(st.SharedBy, r)
			}
		}
		out[n] = st
	}
	return out
}

// claim records an admitted VM's claims.
func (w *diskWorld) claim(ns, vm string, disks []api.DataDisk) {
	key := ns + "/" + vm
	w.vms[key] = true
	for _, d := range disks {
		disk, ok := w.disks[ns+"/"+d.Name]
		if !ok {
			continue
		}
		if d.ReadOnly || d.Type == api.DiskTypeCDROM {
			if !contains(disk.state.SharedBy, key) {
				disk.state.SharedBy = append(disk.state.SharedBy, key)
				sort.Strings(disk.state.SharedBy)
			}
		} else if disk.state.ClaimedBy == "" {
			disk.state.ClaimedBy = key
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// evaluate runs the policies on an admitted VM object.
func evaluate(ctx context.Context, engine *validate.Engine, w *diskWorld, op, ns, name string, object, oldObject Object) (field.ErrorList, []string, error) {
	raw, err := json.Marshal(object)
	if err != nil {
		return nil, nil, err
	}
	var oldRaw []byte
	if oldObject != nil {
		if oldRaw, err = json.Marshal(oldObject); err != nil {
			return nil, nil, err
		}
	}
	disks := parseDisks(object)
	names := make([]string, len(disks))
	for i, d := range disks {
		names[i] = d.Name
	}
	input, err := validate.BuildInput(op, ns, name, raw, oldRaw, nil, w.states(ns, name, names))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	d, err := engine.Evaluate(ctx, input)
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate policies: %w", err)
	}
	var denied field.ErrorList
	for _, v := range d.Deny {
		denied = append(denied, &field.Error{Type: field.ErrorTypeForbidden, Field: v.Field, Detail: v.Message})
	}
	var warnings []string
	for _, v := range d.Warn {
		warnings = append(warnings, fmt.Sprintf("virtstation policy %s: %s: %s", v.ID, v.Field, v.Message))
	}
	if len(denied) == 0 {
		w.claim(ns, name, disks)
	}
	return denied, warnings, nil
}

func parseDisks(obj Object) []api.DataDisk {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	v, _ := ann[api.AnnotationDataDisks].(string)
	disks, _ := api.ParseDataDisks(v, field.NewPath("metadata"))
	return disks
}
