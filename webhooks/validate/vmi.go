package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/admit"
)

// VMIPath is where the claim check for VirtualMachineInstances is served.
const VMIPath = "/validate-kubevirt-io-v1-virtualmachineinstance"

// Every VMI in the cluster, managed or not, and those virt-controller
// creates for VMs as they start, could reach this webhook; so, following
// the failure domain (an outage of Virtstation never blocks unmanaged
// objects, nor KubeVirt's own writes), the API server sends it only what
// could attach a PVC or DataVolume: a CREATE of a VMI with a
// persistentVolumeClaim or dataVolume volume, or an UPDATE that changes
// spec.volumes and leaves such a volume (matchConditions, CEL). Status
// updates by virt-handler never change spec.volumes and never reach it.
// failurePolicy=ignore: while Virtstation is down, a VMI created directly
// or a volume hot-plugged into a running VMI (virtctl addvolume without
// --persist) is admitted unchecked. The trade-off is taken because the
// other choice, fail, would stop every VM with a PVC in the cluster from
// starting during an outage. The claims themselves survive an outage, and
// the managed VMs' own admissions still check them (fail closed).
//
// +kubebuilder:webhook:path=/validate-kubevirt-io-v1-virtualmachineinstance,mutating=false,failurePolicy=ignore,sideEffects=None,groups=kubevirt.io,resources=virtualmachineinstances,verbs=create;update,versions=v1,name=vmi.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]},"matchConditions":[{"name":"attaches-data-volume-or-pvc","expression":"has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.dataVolume) || has(v.persistentVolumeClaim))"},{"name":"create-or-volumes-changed","expression":"request.operation == 'CREATE' || !has(oldObject.spec.volumes) || object.spec.volumes != oldObject.spec.volumes"}]}`

// VMIHandler is the validating webhook for VirtualMachineInstances: it
// denies a VMI that attaches a labelled data disk another VM holds a live
// claim on, whether the VMI is created directly (kubectl create, no VM) or
// a volume is hot-plugged into a running VMI (virt-api's
// virtualmachineinstances/addvolume writes the VMI's spec.volumes and
// spec.domain.devices.disks with a JSON patch). On UPDATE only the disks
// the update adds (or turns writable) are checked.
//
// A VMI controlled by a VirtualMachine of its own name (as virt-controller
// creates them) is judged as that VM: the VM's own claims are its own,
// unless the claim records another uid than the owner reference's. A VMI
// created directly is judged as no VM: every live claim stands in its way.
//
// It only denies (sideEffects=None): a VMI claims nothing. Failures never
// deny: a body or disk state it cannot read admits the VMI with a
// warning, as an unreachable webhook would (failurePolicy=ignore).
// Safe for concurrent use.
type VMIHandler struct {
	attachChecker
}

// NewVMIHandler returns the VMI webhook, judging claims through snapshots
// with the enforcement modes of disk-claim; dryRun may be nil.
func NewVMIHandler(snapshots Snapshotter, modes *atomic.Pointer[policy.Modes], dryRun func(policy.Violation)) *VMIHandler {
	return &VMIHandler{attachChecker{Snapshots: snapshots, Modes: modes, DryRun: dryRun}}
}

var _ admission.Handler = (*VMIHandler)(nil)

// vmiObject is what the handler reads of a VMI.
type vmiObject struct {
	Metadata struct {
		Name              string                  `json:"name"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		DeletionTimestamp *string                 `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// Handle implements admission.Handler.
func (h *VMIHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !admit.CreateOrUpdate(req) {
		return admission.Allowed("")
	}
	var vmi vmiObject
	if err := json.Unmarshal(req.Object.Raw, &vmi); err != nil {
		return badRequest(ctx, req, fmt.Errorf("decode object: %w", err), false)
	}
	if vmi.Metadata.DeletionTimestamp != nil {
		return admission.Allowed("")
	}
	var oldRaw []byte
	if req.Operation == admissionv1.Update {
		oldRaw = req.OldObject.Raw
	}
	attached, err := VMIAttachments(req.Object.Raw, oldRaw)
	if err != nil {
		return badRequest(ctx, req, err, false)
	}
	name := vmi.Metadata.Name
	if name == "" {
		name = req.Name
	}
	self, uid := vmiHolder(req.Namespace, name, vmi.Metadata.OwnerReferences)
	fix := "remove those volumes from this VirtualMachineInstance"
	if len(attached) > 0 && attached[0].Volume != "" {
		fix = fmt.Sprintf("remove volume %q (and its disk) from this VirtualMachineInstance", attached[0].Volume)
	}
	return h.check(ctx, req, attachRequest{self: self, uid: uid, disks: attached, fix: fix})
}

// vmiHolder is the VM a VMI is judged as: the VirtualMachine of the VMI's
// name that controls it, with the owner reference's uid; else no VM
// ("<ns>/", which no claim names).
func vmiHolder(namespace, name string, owners []metav1.OwnerReference) (types.NamespacedName, types.UID) {
	for _, o := range owners {
		if o.Controller != nil && *o.Controller && o.Kind == "VirtualMachine" && o.Name == name &&
			strings.HasPrefix(o.APIVersion, kubevirtv1.SchemeGroupVersion.Group+"/") {
			return types.NamespacedName{Namespace: namespace, Name: name}, o.UID
		}
	}
	return types.NamespacedName{Namespace: namespace}, ""
}

// VMIAttachments returns the disks whose attachment a VMI's admission asks
// for: on CREATE (oldObject empty) every DataVolume and PVC its volumes
// name, on UPDATE only those that oldObject did not attach, or attached
// only read-only where object attaches them writable. Fields are paths in
// the VMI (spec.volumes[i]…).
func VMIAttachments(object, oldObject []byte) ([]VolumeDisk, error) {
	attached, err := vmiVolumeDisks(object)
	if err != nil || len(oldObject) == 0 {
		return attached, err
	}
	had, err := vmiVolumeDisks(oldObject)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	return addedDisks(attached, had), nil
}

// vmiVolumeDisks parses a VMI's volumes and disks as ParseVolumeDisks
// parses a VM template's (a VMI's spec is a VM's spec.template.spec).
func vmiVolumeDisks(raw []byte) ([]VolumeDisk, error) {
	var vmi vmiObject
	if err := json.Unmarshal(raw, &vmi); err != nil {
		return nil, fmt.Errorf("decode virtual machine instance: %w", err)
	}
	if len(vmi.Spec) == 0 || string(vmi.Spec) == "null" {
		return nil, nil
	}
	wrapped, err := json.Marshal(map[string]any{"template": map[string]json.RawMessage{"spec": vmi.Spec}})
	if err != nil {
		return nil, fmt.Errorf("wrap virtual machine instance spec: %w", err)
	}
	disks, err := ParseVolumeDisks(wrapped, nil)
	if err != nil {
		return nil, err
	}
	const templatePrefix = "spec.template.spec."
	for i := range disks {
		disks[i].Field = "spec." + strings.TrimPrefix(disks[i].Field, templatePrefix)
	}
	return disks, nil
}
