package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// VMStatusPath is where the claim check for hot-plug requests on
// VirtualMachines (status.volumeRequests) is served.
const VMStatusPath = "/validate-kubevirt-io-v1-virtualmachine-status"

// `virtctl addvolume <vm> --persist` calls virt-api's
// virtualmachines/addvolume, an aggregated API the API server's webhooks
// never see. What they see is what virt-api writes (KubeVirt v1.9,
// pkg/virt-api/rest/volumes.go): with the HotplugVolumes feature gate, a
// JSON patch of the VM's status.volumeRequests through the
// virtualmachines/status subresource, appending
// {addVolumeOptions: {name, disk, volumeSource: {persistentVolumeClaim |
// dataVolume}}}; virt-controller then copies the volume into the VM's spec
// and the running VMI's. (With only DeclarativeHotplugVolumes, virt-api
// patches the VM's spec.template.spec.volumes, which the VM webhooks see;
// without --persist, it patches the VMI's spec.volumes, which the VMI
// webhook sees.)
//
// The matchConditions send only the status writes that add a request to
// attach a PVC or DataVolume: KubeVirt's own status writes (virt-controller
// clears requests, updates conditions and printableStatus) never add one,
// so they never reach this webhook, and an outage of Virtstation cannot
// block them. Two registrations share the path:
//   - managed VMs (objectSelector): failurePolicy=fail. A hot-plug changes
//     a managed VM's disks as an edit of its spec would, and those fail
//     closed; only a user's addvolume is held up by an outage.
//   - VMs not labelled managed: failurePolicy=ignore. An outage never
//     blocks unmanaged objects; a hot-plug then goes unchecked.
//
// +kubebuilder:webhook:path=/validate-kubevirt-io-v1-virtualmachine-status,mutating=false,failurePolicy=fail,sideEffects=None,groups=kubevirt.io,resources=virtualmachines/status,verbs=update,versions=v1,name=vm-status.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchLabels":{"virtstation.io/managed":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]},"matchConditions":[{"name":"adds-a-volume-request-for-a-data-volume-or-pvc","expression":"has(object.status) && has(object.status.volumeRequests) && object.status.volumeRequests.exists(r, has(r.addVolumeOptions) && has(r.addVolumeOptions.volumeSource) && (has(r.addVolumeOptions.volumeSource.persistentVolumeClaim) || has(r.addVolumeOptions.volumeSource.dataVolume)) && !(has(oldObject.status) && has(oldObject.status.volumeRequests) && r in oldObject.status.volumeRequests))"}]}`
// +kubebuilder:webhook:path=/validate-kubevirt-io-v1-virtualmachine-status,mutating=false,failurePolicy=ignore,sideEffects=None,groups=kubevirt.io,resources=virtualmachines/status,verbs=update,versions=v1,name=vm-status-unmanaged.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchExpressions":[{"key":"virtstation.io/managed","operator":"NotIn","values":["true"]}]},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]},"matchConditions":[{"name":"adds-a-volume-request-for-a-data-volume-or-pvc","expression":"has(object.status) && has(object.status.volumeRequests) && object.status.volumeRequests.exists(r, has(r.addVolumeOptions) && has(r.addVolumeOptions.volumeSource) && (has(r.addVolumeOptions.volumeSource.persistentVolumeClaim) || has(r.addVolumeOptions.volumeSource.dataVolume)) && !(has(oldObject.status) && has(oldObject.status.volumeRequests) && r in oldObject.status.volumeRequests))"}]}`

// VMStatusHandler is the validating webhook for writes of a
// VirtualMachine's status that add hot-plug requests
// (status.volumeRequests[].addVolumeOptions): it denies a request to
// attach a labelled data disk another VM holds a live claim on, or that a
// claim of an earlier VM of this name (another uid) holds. The VM's own
// claims are its own. Only requests the write adds (or turns writable) are
// checked.
//
// It only denies (sideEffects=None): the claim of a managed VM is written
// when virt-controller copies the volume into the VM's spec, whose update
// passes the VM webhook. A managed VM's request fails closed (a body or
// disk state it cannot read is an error), an unmanaged VM's fails open
// (admitted with a warning), as their registrations' failurePolicy does.
// Safe for concurrent use.
type VMStatusHandler struct {
	attachChecker
}

// NewVMStatusHandler returns the VM status webhook, judging claims through
// snapshots with the enforcement modes of disk-claim; dryRun may be nil.
func NewVMStatusHandler(snapshots Snapshotter, modes *atomic.Pointer[policy.Modes], dryRun func(policy.Violation)) *VMStatusHandler {
	return &VMStatusHandler{attachChecker{Snapshots: snapshots, Modes: modes, DryRun: dryRun}}
}

var _ admission.Handler = (*VMStatusHandler)(nil)

// vmStatusObject is what the handler reads of a VM's status write.
type vmStatusObject struct {
	Status struct {
		VolumeRequests []volumeRequest `json:"volumeRequests"`
	} `json:"status"`
}

// vmStatusMetadata is what the handler reads of a VM's metadata.
type vmStatusMetadata struct {
	Name              string            `json:"name"`
	UID               types.UID         `json:"uid"`
	Labels            map[string]string `json:"labels"`
	DeletionTimestamp *string           `json:"deletionTimestamp"`
}

// volumeRequest is the part of a kubevirtv1.VirtualMachineVolumeRequest
// that names a disk. Only these fields are decoded.
type volumeRequest struct {
	AddVolumeOptions *struct {
		Name         string       `json:"name"`
		Disk         *hotplugDisk `json:"disk"`
		VolumeSource *claimSource `json:"volumeSource"`
	} `json:"addVolumeOptions"`
}

// hotplugDisk is the disk of an add-volume request: how it is attached.
type hotplugDisk struct {
	Disk *struct {
		ReadOnly bool `json:"readonly"`
	} `json:"disk"`
	LUN *struct {
		ReadOnly bool `json:"readonly"`
	} `json:"lun"`
	CDRom *struct {
		ReadOnly *bool `json:"readonly"`
	} `json:"cdrom"`
}

// readOnly reports whether the disk is attached read-only: a cdrom (read-
// only unless it says otherwise, as KubeVirt defaults it), or a disk or
// lun marked readonly.
func (d *hotplugDisk) readOnly() bool {
	switch {
	case d == nil:
		return false
	case d.CDRom != nil:
		return d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly
	case d.Disk != nil:
		return d.Disk.ReadOnly
	case d.LUN != nil:
		return d.LUN.ReadOnly
	}
	return false
}

var volumeRequestsPath = field.NewPath("status", "volumeRequests")

// Handle implements admission.Handler.
func (h *VMStatusHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	// The metadata is decoded on its own first: whether the VM is managed
	// decides how a status that cannot be read is answered.
	var vm struct {
		Metadata vmStatusMetadata `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &vm); err != nil {
		return badRequest(ctx, req, fmt.Errorf("decode object: %w", err), false)
	}
	failClosed := vm.Metadata.Labels[api.LabelManaged] == api.LabelTrue
	if vm.Metadata.DeletionTimestamp != nil {
		return admission.Allowed("")
	}
	attached, err := VolumeRequestAttachments(req.Object.Raw, req.OldObject.Raw)
	if err != nil {
		return badRequest(ctx, req, err, failClosed)
	}
	name := vm.Metadata.Name
	if name == "" {
		name = req.Name
	}
	self := types.NamespacedName{Namespace: req.Namespace, Name: name}
	fix := "hot-plug another disk"
	if len(attached) > 0 {
		fix = fmt.Sprintf("do not hot-plug it into this VM (the request for volume %q), hot-plug another disk", attached[0].Volume)
	}
	return h.check(ctx, req, attachRequest{self: self, uid: vm.Metadata.UID, disks: attached, fix: fix, failClosed: failClosed})
}

// VolumeRequestAttachments returns the disks whose hot-plug a VM status
// write asks for: the DataVolumes and PVCs of the addVolumeOptions in
// object's status.volumeRequests that oldObject's requests did not name,
// or named only read-only where object's attach them writable. Fields are
// paths in the VM (status.volumeRequests[i].addVolumeOptions.…).
func VolumeRequestAttachments(object, oldObject []byte) ([]VolumeDisk, error) {
	attached, err := volumeRequestDisks(object)
	if err != nil {
		return nil, err
	}
	if len(oldObject) == 0 {
		return attached, nil
	}
	had, err := volumeRequestDisks(oldObject)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	return addedDisks(attached, had), nil
}

// volumeRequestDisks lists the disks a VM's add-volume requests name, each
// once, at its first writable request if it has one.
func volumeRequestDisks(raw []byte) ([]VolumeDisk, error) {
	var vm vmStatusObject
	if err := json.Unmarshal(raw, &vm); err != nil {
		return nil, fmt.Errorf("decode virtual machine status: %w", err)
	}
	var out []VolumeDisk
	for i, r := range vm.Status.VolumeRequests {
		o := r.AddVolumeOptions
		if o == nil || o.VolumeSource == nil {
			continue
		}
		src := volumeRequestsPath.Index(i).Child("addVolumeOptions", "volumeSource")
		c, ok := o.VolumeSource.claim()
		if !ok || c.Name == "" {
			continue
		}
		d := VolumeDisk{Name: c.Name, Field: c.NameField(src).String(), Volume: o.Name, ReadOnly: o.Disk.readOnly() || c.ReadOnly}
		at := slices.IndexFunc(out, func(e VolumeDisk) bool { return e.Name == d.Name })
		switch {
		case at < 0:
			out = append(out, d)
		case out[at].ReadOnly && !d.ReadOnly:
			out[at] = d
		}
	}
	return out, nil
}
