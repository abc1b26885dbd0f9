package render

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/disks"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// policyTimeout bounds one offline evaluation.
const policyTimeout = 5 * time.Second

// diskWorld is the offline view of data disks and their claims, updated as
// render admits VMs in order, the way the validating webhook writes claims.
// Claims are judged as the webhook judges them (validate.JudgeDisk, hence
// claims.Live), at now with grace.
type diskWorld struct {
	// disks are the DataVolumes and PVCs, found as the webhooks find them;
	// their claims change as VMs are admitted.
	disks *disks.Static
	vms   map[string]*kubevirtv1.VirtualMachine         // "ns/name" of VMs that exist
	vmis  map[string]*kubevirtv1.VirtualMachineInstance // "ns/name"
	// vmisByDisk are the keys of the VMIs whose volumes name each
	// "ns/disk", so that usedBy need not look at every VMI.
	vmisByDisk map[string]map[string]bool
	now        time.Time
	grace      time.Duration
}

func newDiskWorld(lookup *disks.Static, now time.Time, grace time.Duration) *diskWorld {
	return &diskWorld{
		disks: lookup, vms: map[string]*kubevirtv1.VirtualMachine{}, vmis: map[string]*kubevirtv1.VirtualMachineInstance{},
		vmisByDisk: map[string]map[string]bool{},
		now:        now, grace: grace,
	}
}

// add records a DataVolume, PVC or VMI from the objects (VMs come through
// setVM).
func (w *diskWorld) add(obj Object, ns string) error {
	u := &unstructured.Unstructured{Object: obj}
	if w.disks.Add(u, ns) {
		return nil
	}
	if u.GetNamespace() == "" {
		u = u.DeepCopy()
		u.SetNamespace(ns)
	}
	key := u.GetNamespace() + "/" + u.GetName()
	switch u.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachineInstance"}:
		var vmi kubevirtv1.VirtualMachineInstance
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vmi); err != nil {
			return fmt.Errorf("decode VirtualMachineInstance %s: %w", key, err)
		}
		w.vmis[key] = &vmi
		w.indexVMI(&vmi, key)
	}
	return nil
}

// indexVMI records the disks vmi's volumes name (api.VolumeClaim, as the
// claims' usage index finds them), under vmisByDisk.
func (w *diskWorld) indexVMI(vmi *kubevirtv1.VirtualMachineInstance, key string) {
	for _, v := range vmi.Spec.Volumes {
		c, ok := api.VolumeClaim(v.VolumeSource)
		if !ok || c.Name == "" {
			continue
		}
		disk := vmi.Namespace + "/" + c.Name
		if w.vmisByDisk[disk] == nil {
			w.vmisByDisk[disk] = map[string]bool{}
		}
		w.vmisByDisk[disk][key] = true
	}
}

// setVM records a VM that exists (or will, once admitted).
func (w *diskWorld) setVM(vm *kubevirtv1.VirtualMachine) {
	w.vms[vm.Namespace+"/"+vm.Name] = vm
}

// states is the disk snapshot for VM self, as the webhook's Snapshotter
// takes it, and the claims per disk that lapsed.
func (w *diskWorld) states(ctx context.Context, ns, self string, names []string) (map[string]validate.DiskState, map[string][]string, error) {
	out := map[string]validate.DiskState{}
	lapsed := map[string][]string{}
	me := ns + "/" + self
	for _, n := range names {
		f := validate.DiskFacts{UsedBy: w.usedBy(ns, self, n)}
		d, ok, err := w.disks.Disk(ctx, ns, n)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			f.Kind, f.Labelled, f.Claims = d.Kind, d.Labelled, d.Claims
			f.Claimants = map[string]claims.Facts{}
			for _, holder := range d.Claims.Holders() {
				// A VM in the manifests without a uid is taken to be the
				// holder; one with another uid than the claim's is not.
				if vm, ok := w.vms[holder]; ok && holder != me && (vm.UID == "" || d.Claims.BoundTo(holder, vm.UID)) {
					f.Claimants[holder] = claims.Facts{Exists: true, Attaches: vm.Namespace == ns && claims.Attaches(vm, n)}
				}
			}
		}
		st, dead := validate.JudgeDisk(f, me, w.now, w.grace)
		out[n] = st
		if len(dead) > 0 {
			lapsed[n] = dead
		}
	}
	return out, lapsed, nil
}

// usedBy lists the VMIs of ns, other than self's, that use the disk.
func (w *diskWorld) usedBy(ns, self, disk string) []string {
	var out []string
	for key := range w.vmisByDisk[ns+"/"+disk] {
		// The index may hold a VMI replaced since; the check is on the
		// current one.
		if vmi := w.vmis[key]; vmi.Namespace == ns && vmi.Name != self && claims.UsesDisk(vmi, disk) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// claim records an admitted VM's claims, dropping the lapsed ones as the
// webhook's claim write replaces them.
func (w *diskWorld) claim(ctx context.Context, ns, vm string, targets []validate.ClaimTarget, lapsed map[string][]string) error {
	key := ns + "/" + vm
	for _, t := range targets {
		disk, ok, err := w.disks.Disk(ctx, ns, t.Name)
		if err != nil {
			return err
		}
		if !ok || (t.Direct && !disk.Labelled) {
			continue
		}
		s := disk.Claims
		for _, dead := range lapsed[t.Name] {
			if s.ClaimedBy == dead {
				s.ClaimedBy = ""
			}
			s.SharedBy = slices.DeleteFunc(slices.Clone(s.SharedBy), func(r string) bool { return r == dead })
		}
		if t.ReadOnly {
			if !slices.Contains(s.SharedBy, key) {
				s.SharedBy = append(s.SharedBy, key)
				sort.Strings(s.SharedBy)
			}
		} else if s.ClaimedBy == "" {
			s.ClaimedBy = key
		}
		s.ClaimedAt = w.now
		w.disks.SetClaims(ns, t.Name, s)
	}
	return nil
}

// evaluate runs the policies on an admitted VM object, and enforces their
// verdict under modes as the webhook does: a rule in warn mode warns, one in
// dryrun mode admits.
func evaluate(ctx context.Context, engine *validate.Engine, modes policy.Modes, w *diskWorld, op, ns, name string, object, oldObject Object) (field.ErrorList, []string, error) {
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
	// Decoded, and its data-disks annotation parsed, once, as the
	// validating webhook does.
	r, err := validate.DecodeRequest(op, ns, name, raw, oldRaw, nil)
	if err != nil {
		return nil, nil, err
	}
	if errs := r.DataDiskErrors(); len(errs) > 0 {
		// The mutating webhook denies these before the policies run.
		return errs, nil, nil
	}
	targets := validate.ClaimTargets(r.DataDisks(), r.VolumeDisks())
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	states, lapsed, err := w.states(ctx, ns, name, names)
	if err != nil {
		return nil, nil, err
	}
	input, err := r.Input(states)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	d, err := engine.Evaluate(ctx, input)
	if err != nil {
		return nil, nil, fmt.Errorf("evaluate policies: %w", err)
	}
	deny, warn, _ := modes.Apply(d)
	denied, warnings := validate.ViolationErrors(deny), validate.ViolationWarnings(warn)
	if len(denied) == 0 {
		if err := w.claim(ctx, ns, name, targets, lapsed); err != nil {
			return nil, nil, err
		}
	}
	return denied, warnings, nil
}

// checkUnmanaged is the unmanaged-VM webhook's claim check on obj (old is
// the stored VM for an UPDATE, or nil).
func checkUnmanaged(ctx context.Context, w *diskWorld, obj, old Object, ns, name string) (field.ErrorList, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var oldRaw []byte
	if old != nil {
		if oldRaw, err = json.Marshal(old); err != nil {
			return nil, err
		}
	}
	attached, err := validate.UnmanagedAttachments(raw, oldRaw)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(attached))
	for i, d := range attached {
		names[i] = d.Name
	}
	states, _, err := w.states(ctx, ns, name, names)
	if err != nil {
		return nil, err
	}
	return validate.ViolationErrors(validate.UnmanagedViolations(attached, states)), nil
}
