package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// judged is what one VM's last evaluation found, and on what.
type judged struct {
	// key identifies the evaluation's input (see inputKey).
	key     string
	results []policyreport.Result
	// rv is the VM's resourceVersion then, and disks the disks it names:
	// a resync of an unchanged VM reads their state without decoding the
	// VM again.
	rv    string
	disks []string
}

// policyState is the policy set and modes one audit runs under.
type policyState struct {
	revision string
	rules    []string
	modes    policy.Modes
}

// AuditRequest is how the audit presents a stored VM to the policies: an
// UPDATE of the VM onto itself, which is what the validating webhook would
// judge if its owner applied it again unchanged. `virtstation render
// --report` presents VMs the same way.
func AuditRequest(vmJSON []byte, namespace, name string) (validate.Request, error) {
	return validate.DecodeRequest("UPDATE", namespace, name, vmJSON, vmJSON, nil)
}

// evaluateVM returns vm's results under ps, evaluating its policies only
// when its input changed since prev (the VM's last evaluation; the zero
// value when there was none). vmis are the namespace's VMIs.
func (a *Auditor) evaluateVM(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmis []kubevirtv1.VirtualMachineInstance, ps policyState, prev judged, now time.Time) (judged, bool, error) {
	var r validate.Request
	decoded := false
	decode := func() error {
		raw, err := json.Marshal(vm)
		if err != nil {
			return fmt.Errorf("encode VM %s/%s: %w", vm.Namespace, vm.Name, err)
		}
		r, err = AuditRequest(raw, vm.Namespace, vm.Name)
		decoded = true
		return err
	}
	names := prev.disks
	if prev.key == "" || prev.rv != vm.ResourceVersion {
		if err := decode(); err != nil {
			return judged{}, false, err
		}
		targets := validate.ClaimTargets(r.DataDisks(), r.VolumeDisks())
		names = make([]string, len(targets))
		for i, t := range targets {
			names[i] = t.Name
		}
	}
	self := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	snap, err := a.Snapshots.SnapshotAmong(ctx, vmis, vm.Namespace, self, names, false, now)
	if err != nil {
		return judged{}, false, fmt.Errorf("read the data disks of VM %s: %w", self, err)
	}
	key, err := inputKey(vm, ps, snap.States)
	if err != nil {
		return judged{}, false, err
	}
	if key == prev.key {
		return prev, false, nil
	}
	if !decoded {
		if err := decode(); err != nil {
			return judged{}, false, err
		}
	}
	out := judged{key: key, rv: vm.ResourceVersion, disks: names}
	d, err := a.Engine.EvaluateRequest(ctx, r, snap.States)
	if err != nil && ctx.Err() != nil {
		return judged{}, false, err
	}
	ref := policyreport.VMRef(vm.Namespace, vm.Name, vm.UID)
	out.results = policyreport.FromEvaluation(ref, ps.rules, d, err, ps.modes, ps.revision)
	return out, true, nil
}

// inputKey identifies an evaluation's input: the VM as stored (its UID and
// resourceVersion), the disks' state it was judged on, the policy set and
// the modes.
func inputKey(vm *kubevirtv1.VirtualMachine, ps policyState, disks map[string]validate.DiskState) (string, error) {
	b, err := json.Marshal(struct {
		UID, RV, Revision, Modes string
		Disks                    map[string]validate.DiskState
	}{string(vm.UID), vm.ResourceVersion, ps.revision, ps.modes.String(), disks})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
