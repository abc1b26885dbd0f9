package api

// Labels that opt objects in to Virtstation.
const (
	// LabelManaged on a VirtualMachine makes the webhooks act on it. The
	// webhook configurations select on it, so unlabelled VMs never reach them.
	LabelManaged = "virtstation.io/managed"
	// LabelDataDisk on a DataVolume or PVC marks a reusable data disk.
	LabelDataDisk = "virtstation.io/data-disk"
	// LabelSSHPublicKey on a Secret marks it as a source of SSH public keys.
	LabelSSHPublicKey = "virtstation.io/ssh-public-key"
	// LabelPolicy on a ConfigMap in the install namespace marks operator Rego.
	LabelPolicy = "virtstation.io/policy"

	// LabelTrue is the value the opt-in labels must carry.
	LabelTrue = "true"
)

// Annotations a user sets on a managed VirtualMachine.
const (
	// AnnotationMAC is auto (default), off, or a MAC address for the
	// pod-network interface.
	AnnotationMAC = "virtstation.io/mac"
	// AnnotationDataDisks lists the data disks to attach and mount:
	// "name:/mount[,name:/mount]" or a JSON list (see ParseDataDisks).
	AnnotationDataDisks = "virtstation.io/data-disks"
	// AnnotationGPUs lists GPUs as "deviceName=count[,…]".
	AnnotationGPUs = "virtstation.io/gpus"
	// AnnotationSSHUser is the guest account SSH keys are given to.
	AnnotationSSHUser = "virtstation.io/ssh-user"
	// AnnotationSSHPropagation is qemuGuestAgent (default) or cloudInit.
	AnnotationSSHPropagation = "virtstation.io/ssh-propagation"
	// AnnotationVideo sets domain.devices.video.type.
	AnnotationVideo = "virtstation.io/video"
	// AnnotationSharedMemory is denied by policy: VMs cannot use shared memory.
	AnnotationSharedMemory = "virtstation.io/shared-memory"
)

// Labels Virtstation puts on the objects it creates.
const (
	// LabelManagedBy marks Secrets the webhooks and reconcilers own.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "virtstation"
)

// Annotations the webhooks write.
const (
	// AnnotationInjected records, as JSON, what the mutating webhook did.
	AnnotationInjected = "virtstation.io/injected"
	// AnnotationPolicyRevision names the policy set active when the VM was
	// admitted.
	AnnotationPolicyRevision = "virtstation.io/policy-revision"
)

// Annotations on a data disk that record its claims (package claims reads
// and writes them).
const (
	// AnnotationClaimedBy is "<ns>/<vm>": the one writable claim.
	AnnotationClaimedBy = "virtstation.io/claimed-by"
	// AnnotationClaimedAt is RFC 3339: when the newest claim was written
	// (or an existing one confirmed).
	AnnotationClaimedAt = "virtstation.io/claimed-at"
	// AnnotationSharedBy is "<ns>/<vm>,<ns>/<vm>": the read-only (cdrom,
	// readOnly) claims, sorted.
	AnnotationSharedBy = "virtstation.io/shared-by"
	// AnnotationClaimUIDs is "<ns>/<vm>=<uid>,…", sorted: the metadata.uid
	// of the VM each claim was written for. It binds a claim to that one
	// VM: a VM of the same name with another uid (deleted and recreated,
	// or never stored, as for a forged create) does not hold the claim.
	// Claims written before it existed have no entry and are bound by name.
	AnnotationClaimUIDs = "virtstation.io/claim-uids"
)

// Kinds of object a data disk is.
const (
	// KindDataVolume is a CDI DataVolume (cdi.kubevirt.io).
	KindDataVolume = "DataVolume"
	// KindPVC is a core PersistentVolumeClaim.
	KindPVC = "PersistentVolumeClaim"
)
