package claims

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/webhooks/admit"
)

// DeletionGuardPath is where the DeletionGuard is served, for DataVolumes
// and PVCs alike.
const DeletionGuardPath = "/validate-data-disk-delete"

// The API server calls the guard only for DELETEs of objects labelled
// virtstation.io/data-disk=true (objectSelector), outside the system
// namespaces, so failurePolicy=fail cannot block other deletions.
//
// +kubebuilder:webhook:path=/validate-data-disk-delete,mutating=false,failurePolicy=fail,sideEffects=None,groups=cdi.kubevirt.io,resources=datavolumes,verbs=delete,versions=v1beta1,name=datavolume-delete.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchLabels":{"virtstation.io/data-disk":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]}}`
// +kubebuilder:webhook:path=/validate-data-disk-delete,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=persistentvolumeclaims,verbs=delete,versions=v1,name=pvc-delete.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=5,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchLabels":{"virtstation.io/data-disk":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","virtstation-system"]}]}}`

// RBAC the guard needs (through its Reader):
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines;virtualmachineinstances,verbs=get;list
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get

// DeletionGuard is the validating webhook for DELETE of DataVolumes and PVCs
// labelled as data disks. It denies the deletion while a VM that exists
// holds a claim on the disk (writable or read-only) and attaches it, while a
// claim is younger than Grace (its VM's create may be in flight), or while a
// VirtualMachineInstance in the namespace has a volume backed by the disk:
// the claims that Live says hold, as the Releaser and the VM webhook judge
// them.
// A PVC owned by a DataVolume is guarded by the DataVolume's claims too.
// Everything else is allowed.
//
// It is safe for concurrent use.
type DeletionGuard struct {
	// Reader reads VMs, VMIs and DataVolumes from the API server:
	// mgr.GetAPIReader(). A deletion decided on a stale cache is not
	// undone.
	Reader client.Reader
	// Grace is how long a claim counts even though its VM does not exist
	// (yet); zero means DefaultGrace.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ admission.Handler = (*DeletionGuard)(nil)

// Handle implements admission.Handler.
func (g *DeletionGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	if len(req.OldObject.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("DELETE of %s %s/%s carries no oldObject", req.Kind.Kind, req.Namespace, req.Name))
	}
	var disk metav1.PartialObjectMetadata
	if err := json.Unmarshal(req.OldObject.Raw, &disk); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode %s: %w", req.Kind.Kind, err))
	}
	if disk.Labels[api.LabelDataDisk] != api.LabelTrue {
		return admission.Allowed("")
	}
	kind := req.Kind.Kind
	if kind == "" {
		kind = disk.Kind
	}
	b, err := g.blockers(ctx, kind, &disk)
	if err != nil {
		logf.FromContext(ctx).Error(err, "check data disk before deletion", "uid", req.UID, "kind", kind, "namespace", disk.Namespace, "name", disk.Name)
		return admit.Internal(req.UID, "check whether %s %s/%s is in use", kind, disk.Namespace, disk.Name)
	}
	if errs := b.errors(); len(errs) > 0 {
		return admit.Deny(errs)
	}
	return admission.Allowed("")
}

// blockers gathers what stands in the way of deleting disk: the VMIs using
// it, and the claims on it (or on its DataVolume) that Live says hold.
func (g *DeletionGuard) blockers(ctx context.Context, kind string, disk *metav1.PartialObjectMetadata) (Blockers, error) {
	key := types.NamespacedName{Namespace: disk.Namespace, Name: disk.Name}
	b := Blockers{Kind: kind, Disk: key}
	vmis, err := vmisUsing(ctx, g.Reader, key)
	if err != nil {
		return b, err
	}
	b.VMIs = vmis
	if err := g.addClaims(ctx, &b, Read(disk), ""); err != nil {
		return b, err
	}
	if owner := dataVolumeOwner(disk); owner != "" {
		var dv cdiv1beta1.DataVolume
		err := g.Reader.Get(ctx, types.NamespacedName{Namespace: disk.Namespace, Name: owner}, &dv)
		switch {
		case err == nil:
			if err := g.addClaims(ctx, &b, Read(&dv), owner); err != nil {
				return b, err
			}
		case !apierrors.IsNotFound(err):
			return b, fmt.Errorf("get owning data volume %s: %w", owner, err)
		}
	}
	return b, nil
}

// addClaims adds the claims in s that hold (Live). A claim that holds only
// because a VMI uses the disk is left out: b.VMIs names that VMI, which is
// what the user has to stop. via names the DataVolume the claims were read
// from, when not the disk itself.
func (g *DeletionGuard) addClaims(ctx context.Context, b *Blockers, s State, via string) error {
	for _, holder := range s.Holders() {
		_, readOnly := s.Holds(holder)
		f, err := ClaimantFacts(ctx, g.Reader, holder, s.UID(holder), b.Disk)
		if err != nil {
			return err
		}
		l := Live(f, len(b.VMIs) > 0, s.ClaimedAt, g.now(), GraceOrDefault(g.Grace))
		if l.Reason == Lapsed || l.Reason == InUse {
			continue
		}
		b.Claims = append(b.Claims, BlockingClaim{VM: holder, ReadOnly: readOnly, Via: via, Exists: f.Exists, Pending: l.Remaining})
	}
	return nil
}

// ClaimantFacts reads what Live needs to know about the claimant holder
// ("<ns>/<vm>") of the disk at key, through r: whether the VM exists, and
// whether it attaches the disk. A holder that names no VM is a VM that does
// not exist; a VM of another namespace than the disk's does not attach it.
// uid is the uid the claim was written for (State.UID): a stored VM of that
// name with another uid is not the holder, so the holder does not exist.
// An empty uid (a claim written before uids were recorded) matches any.
func ClaimantFacts(ctx context.Context, r client.Reader, holder string, uid types.UID, key types.NamespacedName) (Facts, error) {
	name, ok := ParseName(holder)
	if !ok {
		return Facts{}, nil
	}
	var vm kubevirtv1.VirtualMachine
	if err := r.Get(ctx, name, &vm); err != nil {
		if apierrors.IsNotFound(err) {
			return Facts{}, nil
		}
		return Facts{}, fmt.Errorf("get virtual machine %s: %w", name, err)
	}
	if uid != "" && vm.UID != uid {
		return Facts{}, nil
	}
	return Facts{Exists: true, Attaches: vm.Namespace == key.Namespace && Attaches(&vm, key.Name)}, nil
}

// dataVolumeOwner returns the name of the DataVolume controlling a PVC, or "".
func dataVolumeOwner(obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != api.KindDataVolume || !strings.HasPrefix(ref.APIVersion, cdiv1beta1.SchemeGroupVersion.Group+"/") {
		return ""
	}
	return ref.Name
}

func (g *DeletionGuard) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}
