package claims

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// BlockingClaim is a claim that stands in the way of deleting a disk.
type BlockingClaim struct {
	// VM holds the claim: "<ns>/<vm>".
	VM string
	// ReadOnly: the claim is a read-only one (shared-by).
	ReadOnly bool
	// Pending, when positive, says the VM does not exist (yet), or exists
	// but does not attach the disk, and the claim still counts for this
	// long: its create or update may be in flight.
	Pending time.Duration
	// Exists: the VM exists (it does not attach the disk when Pending).
	Exists bool
	// Via names the DataVolume the claim is on, when the disk is that
	// DataVolume's PVC; "" when the claim is on the disk itself.
	Via string
}

// Blockers is what stands in the way of deleting a disk.
type Blockers struct {
	// Kind is DataVolume or PersistentVolumeClaim.
	Kind string
	// Disk is the disk's namespace and name.
	Disk types.NamespacedName
	// Claims are the claims that count.
	Claims []BlockingClaim
	// VMIs are the VirtualMachineInstances ("<ns>/<vmi>") with a volume
	// backed by the disk.
	VMIs []string
}

// errors is the denial for b, one error per blocker, each naming the VM or
// VMI and the fix; empty when nothing blocks.
func (b Blockers) errors() field.ErrorList {
	var errs field.ErrorList
	annotations := field.NewPath("metadata", "annotations")
	this := fmt.Sprintf("%s %s", b.Kind, b.Disk)
	for _, c := range b.Claims {
		path, how := annotations.Key(api.AnnotationClaimedBy), "writable"
		if c.ReadOnly {
			path, how = annotations.Key(api.AnnotationSharedBy), "read-only"
		}
		subject := this
		if c.Via != "" {
			path = field.NewPath("metadata", "ownerReferences")
			subject = fmt.Sprintf("%s belongs to DataVolume %s/%s, which", this, b.Disk.Namespace, c.Via)
		}
		var detail, fix string
		if c.Pending > 0 && c.Exists {
			detail = fmt.Sprintf("%s is claimed %s by VirtualMachine %s, which does not attach it (any more); the claim was written moments ago, so an update of that VM may still be in progress", subject, how, c.VM)
			fix = fmt.Sprintf("retry in %s", roundUp(c.Pending))
		} else if c.Pending > 0 {
			detail = fmt.Sprintf("%s is claimed %s by VirtualMachine %s, which does not exist yet: its create may still be in progress", subject, how, c.VM)
			fix = fmt.Sprintf("retry in %s; if the VM was created by then, delete it or detach the disk from it first", roundUp(c.Pending))
		} else {
			detail = fmt.Sprintf("%s is attached %s to VirtualMachine %s", subject, how, c.VM)
			fix = fmt.Sprintf("delete VirtualMachine %s, or detach the disk by removing it from the VM's virtstation.io/data-disks annotation or spec.template.spec.volumes, then delete the %s", c.VM, b.Kind)
		}
		errs = append(errs, field.Forbidden(path, policy.Explain(detail, policy.RuleDataDiskDelete, fix)))
	}
	for _, vmi := range b.VMIs {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), policy.Explain(
			fmt.Sprintf("%s is in use by VirtualMachineInstance %s", this, vmi), policy.RuleDataDiskDelete,
			fmt.Sprintf("stop that VM (virtctl stop) and delete it or detach the disk first, then delete the %s", b.Kind))))
	}
	return errs
}

// roundUp rounds d up to whole seconds, for messages.
func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}
