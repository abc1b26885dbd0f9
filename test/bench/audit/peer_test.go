package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/audit"
	"github.com/virtstation/virtstation/webhooks/provenance"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// peerCost is what the validating webhook spends judging every VM once.
type peerCost struct {
	// Handler is VMHandler.Handle summed over the VMs: decode, disk
	// snapshot from the cache, evaluation, modes (no claim: DryRun).
	Handler time.Duration
	// HandlerCPU is this process's CPU time over the handler's loop.
	HandlerCPU time.Duration
	// Evaluate is Engine.EvaluateRequest alone summed over the VMs, on the
	// same requests and disk states.
	Evaluate time.Duration
}

// vmHandler is the validating webhook's handler, built as webhooks.Setup
// builds it, on the benchmark's engine and modes.
func vmHandler(mgr ctrl.Manager, engine *validate.Engine, modes *atomic.Pointer[policy.Modes], snaps validate.Snapshotter) *validate.VMHandler {
	m := validate.DefaultMetrics()
	return &validate.VMHandler{
		Engine: engine, Modes: modes, Client: mgr.GetClient(), Verifier: provenance.Verifier{Reader: mgr.GetAPIReader()},
		DryRun: m.DryRunViolation, Recorder: mgr.GetEventRecorder("virtstation-policy"), Metrics: m, Snapshots: snaps,
	}
}

// updateOntoItself is the AdmissionRequest of an UPDATE of the stored VM
// onto itself, as a dry run.
func updateOntoItself(vm *kubevirtv1.VirtualMachine, raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:      types.UID("bench-" + string(vm.UID)),
		Kind:     metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
		Resource: metav1.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
		Name:     vm.Name, Namespace: vm.Namespace, Operation: admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{Username: "heidi", Groups: []string{"system:authenticated"}},
		Object:   runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
		DryRun: ptr.To(true),
	}}
}

// measurePeer runs the handler, then the evaluation alone, once on each VM,
// one after the other as the audit evaluates them; it fails when the
// webhook would not admit a VM the audit reports on.
func measurePeer(ctx context.Context, h *validate.VMHandler, vms []kubevirtv1.VirtualMachine, cpu func() time.Duration) (peerCost, error) {
	var cost peerCost
	raws := make([][]byte, len(vms))
	for i := range vms {
		raw, err := json.Marshal(&vms[i])
		if err != nil {
			return cost, err
		}
		raws[i] = raw
	}
	cpuBefore := cpu()
	for i := range vms {
		req := updateOntoItself(&vms[i], raws[i])
		start := time.Now()
		resp := h.Handle(ctx, req)
		cost.Handler += time.Since(start)
		if !resp.Allowed {
			return cost, fmt.Errorf("the webhook denies an UPDATE of VM %s/%s onto itself: %v", vms[i].Namespace, vms[i].Name, resp.Result)
		}
	}
	cost.HandlerCPU = cpu() - cpuBefore
	now := time.Now()
	for i := range vms {
		vm := &vms[i]
		r, err := audit.AuditRequest(raws[i], vm.Namespace, vm.Name)
		if err != nil {
			return cost, err
		}
		targets := validate.ClaimTargets(r.DataDisks(), r.VolumeDisks())
		names := make([]string, len(targets))
		for j, t := range targets {
			names[j] = t.Name
		}
		snap, err := h.Snapshots.Snapshot(ctx, vm.Namespace, types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}, names, false, now)
		if err != nil {
			return cost, err
		}
		start := time.Now()
		if _, err := h.Engine.EvaluateRequest(ctx, r, snap.States); err != nil {
			return cost, fmt.Errorf("evaluate VM %s/%s: %w", vm.Namespace, vm.Name, err)
		}
		cost.Evaluate += time.Since(start)
	}
	return cost, nil
}
