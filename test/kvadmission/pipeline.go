package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfield "k8s.io/apimachinery/pkg/util/validation/field"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/client-go/kubecli"

	instancetypeWebhooks "kubevirt.io/kubevirt/pkg/instancetype/webhooks/vm"
	netadmitter "kubevirt.io/kubevirt/pkg/network/admitter"
	"kubevirt.io/kubevirt/pkg/virt-api/webhooks"
	"kubevirt.io/kubevirt/pkg/virt-api/webhooks/mutating-webhook/mutators"
	"kubevirt.io/kubevirt/pkg/virt-api/webhooks/validating-webhook/admitters"
	virtconfig "kubevirt.io/kubevirt/pkg/virt-config"
	vmwatch "kubevirt.io/kubevirt/pkg/virt-controller/watch/vm"
)

// Stage names where KubeVirt refused a VM.
const (
	// StageVM is virt-api's VirtualMachine admission: kubectl apply fails.
	StageVM = "vm"
	// StageVMI is the VirtualMachineInstance virt-controller would create
	// when the VM starts: apply succeeds, the start fails.
	StageVMI = "vmi"
)

// Cause is one reason KubeVirt gave.
type Cause struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Verdict is KubeVirt's answer for one VM.
type Verdict struct {
	Name     string   `json:"name"`
	Allowed  bool     `json:"allowed"`
	Stage    string   `json:"stage,omitempty"`
	Causes   []Cause  `json:"causes,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// pipeline runs KubeVirt's own webhooks in the order a cluster does.
type pipeline struct {
	config    *virtconfig.ClusterConfig
	client    kubecli.KubevirtClient
	vmMutator *mutators.VMsMutator
	vmAdmit   *admitters.VMsAdmitter
	vmiAdmit  *admitters.VMICreateAdmitter
}

func newPipeline(config *virtconfig.ClusterConfig, client kubecli.KubevirtClient) *pipeline {
	none := map[string]struct{}{}
	return &pipeline{
		config:    config,
		client:    client,
		vmMutator: mutators.NewVMsMutator(config, client),
		vmAdmit:   admitters.NewVMsAdmitter(config, client, &webhooks.Informers{}, none),
		vmiAdmit: &admitters.VMICreateAdmitter{
			ClusterConfig:           config,
			KubeVirtServiceAccounts: none,
			// As virt-api registers it (pkg/virt-api/api.go).
			SpecValidators: []admitters.SpecValidator{
				func(f *k8sfield.Path, s *v1.VirtualMachineInstanceSpec, c *virtconfig.ClusterConfig) []metav1.StatusCause {
					return netadmitter.Validate(f, s, c)
				},
			},
		},
	}
}

// checkVM judges a VirtualMachine as admitted by op (CREATE or UPDATE; an
// UPDATE is checked against itself as the old object, so only the VM's own
// content is judged).
func (p *pipeline) checkVM(ctx context.Context, raw []byte, op admissionv1.Operation) (Verdict, error) {
	var vm v1.VirtualMachine
	if err := json.Unmarshal(raw, &vm); err != nil {
		return Verdict{}, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	v := Verdict{Name: vm.Namespace + "/" + vm.Name}
	if vm.Name == "" {
		v.Name = vm.Namespace + "/" + vm.GenerateName
	}
	vmReq := request(op, webhooks.VirtualMachineGroupVersionResource.Group, "v1", webhooks.VirtualMachineGroupVersionResource.Resource, vm.Namespace, vm.Name, raw)

	// virt-api's VM mutator: in a cluster the validating webhook sees the
	// VM after it.
	mresp := p.vmMutator.Mutate(vmReq)
	if !mresp.Allowed {
		return refused(v, StageVM, mresp), nil
	}
	mutated, err := applyPatch(raw, mresp.Patch)
	if err != nil {
		return Verdict{}, fmt.Errorf("apply KubeVirt's VM mutation: %w", err)
	}
	vmReq = request(op, webhooks.VirtualMachineGroupVersionResource.Group, "v1", webhooks.VirtualMachineGroupVersionResource.Resource, vm.Namespace, vm.Name, mutated)
	aresp := p.vmAdmit.Admit(ctx, vmReq)
	v.Warnings = append(v.Warnings, aresp.Warnings...)
	if !aresp.Allowed {
		return refused(v, StageVM, aresp), nil
	}

	// At start: virt-controller applies the instancetype and preference and
	// builds the VMI; virt-api mutates and validates it.
	var started v1.VirtualMachine
	if err := json.Unmarshal(mutated, &started); err != nil {
		return Verdict{}, err
	}
	if started.Name == "" {
		started.Name = started.GenerateName + "x0000"
	}
	if started.UID == "" {
		started.UID = types.UID("00000000-0000-0000-0000-000000000001")
	}
	vmi, causes := p.setupVMI(&started)
	if len(causes) > 0 {
		return refused(v, StageVMI, &admissionv1.AdmissionResponse{Result: &metav1.Status{Details: &metav1.StatusDetails{Causes: causes}}}), nil
	}
	iv, err := p.admitVMI(ctx, vmi)
	if err != nil {
		return Verdict{}, err
	}
	iv.Name, iv.Warnings = v.Name, append(v.Warnings, iv.Warnings...)
	return iv, nil
}

// setupVMI is virt-controller's start of vm: the instancetype and
// preference applied, then the VMI it creates.
func (p *pipeline) setupVMI(vm *v1.VirtualMachine) (*v1.VirtualMachineInstance, []metav1.StatusCause) {
	if _, _, causes := instancetypeWebhooks.NewAdmitter(p.client).ApplyToVM(vm); len(causes) > 0 {
		return nil, causes
	}
	return vmwatch.SetupVMIFromVM(vm), nil
}

// startVM is the VirtualMachineInstance a cluster would store when the
// stored VirtualMachine raw starts: virt-controller's VMI with virt-api's
// VMI mutations applied (defaults such as disk buses and the firmware's
// serial). Admission is not judged here: creating the VMI does that.
func (p *pipeline) startVM(raw []byte) (*v1.VirtualMachineInstance, error) {
	var vm v1.VirtualMachine
	if err := json.Unmarshal(raw, &vm); err != nil {
		return nil, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	if vm.Name == "" || vm.UID == "" || vm.Spec.Template == nil {
		return nil, errors.New("a stored VirtualMachine (with a name, a uid and a template) is needed")
	}
	vmi, causes := p.setupVMI(&vm)
	if len(causes) > 0 {
		return nil, fmt.Errorf("apply the instancetype: %v", causes)
	}
	if err := mutators.ApplyNewVMIMutations(vmi, p.config); err != nil {
		return nil, fmt.Errorf("KubeVirt's VMI mutations: %w", err)
	}
	return vmi, nil
}

// checkVMI judges a VirtualMachineInstance created directly, as virt-api
// does: its mutator's defaults, then its create admitter.
func (p *pipeline) checkVMI(ctx context.Context, raw []byte) (Verdict, error) {
	var vmi v1.VirtualMachineInstance
	if err := json.Unmarshal(raw, &vmi); err != nil {
		return Verdict{}, fmt.Errorf("decode VirtualMachineInstance: %w", err)
	}
	v, err := p.admitVMI(ctx, &vmi)
	v.Name = vmi.Namespace + "/" + vmi.Name
	return v, err
}

// admitVMI runs virt-api's VMI mutations and create admission on vmi.
func (p *pipeline) admitVMI(ctx context.Context, vmi *v1.VirtualMachineInstance) (Verdict, error) {
	var v Verdict
	if err := mutators.ApplyNewVMIMutations(vmi, p.config); err != nil {
		return refused(v, StageVMI, &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}), nil
	}
	vmiRaw, err := json.Marshal(vmi)
	if err != nil {
		return Verdict{}, err
	}
	vmiReq := request(admissionv1.Create, "kubevirt.io", "v1", "virtualmachineinstances", vmi.Namespace, vmi.Name, vmiRaw)
	iresp := p.vmiAdmit.Admit(ctx, vmiReq)
	v.Warnings = iresp.Warnings
	if !iresp.Allowed {
		return refused(v, StageVMI, iresp), nil
	}
	v.Allowed = true
	return v, nil
}

// request wraps an object in an AdmissionReview as the API server sends it.
func request(op admissionv1.Operation, group, version, resource, ns, name string, raw []byte) *admissionv1.AdmissionReview {
	req := &admissionv1.AdmissionRequest{
		UID:       "kvadmission",
		Kind:      metav1.GroupVersionKind{Group: group, Version: version},
		Resource:  metav1.GroupVersionResource{Group: group, Version: version, Resource: resource},
		Namespace: ns,
		Name:      name,
		Operation: op,
		UserInfo:  authv1.UserInfo{Username: "kvadmission-user"},
		Object:    runtime.RawExtension{Raw: raw},
	}
	if op == admissionv1.Update {
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	return &admissionv1.AdmissionReview{Request: req}
}

// refused turns a denial into a Verdict.
func refused(v Verdict, stage string, resp *admissionv1.AdmissionResponse) Verdict {
	v.Allowed, v.Stage = false, stage
	if resp.Result != nil {
		if d := resp.Result.Details; d != nil {
			for _, c := range d.Causes {
				v.Causes = append(v.Causes, Cause{Field: c.Field, Message: c.Message})
			}
		}
		if len(v.Causes) == 0 {
			v.Causes = []Cause{{Message: resp.Result.Message}}
		}
	}
	return v
}

// applyPatch applies a JSON patch KubeVirt's mutator returned.
func applyPatch(raw, p []byte) ([]byte, error) {
	if len(p) == 0 {
		return raw, nil
	}
	ops, err := jsonpatch.DecodePatch(p)
	if err != nil {
		return nil, err
	}
	return ops.Apply(raw)
}
