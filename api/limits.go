package api

// Limits on what the webhooks read from a managed VirtualMachine. Each fits
// inside KubeVirt v1.9.0's and Kubernetes' own limits, so a VM Virtstation
// admits is never one KubeVirt or the API server rejects for its size, and
// each bounds the work one admission can cost: the webhooks check a limit
// before doing work proportional to the value. Going over one is an
// admission denial that names the field, the limit and the fix.
//
// The "Limits" table in docs/usage.md lists them for users; keep the two in step.
const (
	// MaxAnnotationBytes bounds the value of each virtstation.io/
	// annotation a user sets. The largest legitimate one is a JSON
	// virtstation.io/data-disks list of MaxDataDisks entries, each a
	// 253-character name and a 255-character mount path (about 9 KiB).
	// Kubernetes allows 256 KiB for all of an object's annotations
	// together (TotalAnnotationSizeLimitB); this leaves most of that to
	// other tools.
	MaxAnnotationBytes = 16 << 10

	// MaxInjectedBytes bounds virtstation.io/injected, the record the
	// webhook writes itself. What it records is bounded by the limits
	// above (at most MaxDataDisks disks, MaxGPUs GPUs, one MAC, one
	// cloud-init volume), so a record the webhook wrote always fits; a
	// larger one was written by hand.
	MaxInjectedBytes = 64 << 10

	// MaxGPUs bounds the GPUs one admission adds to
	// spec.template.spec.domain.devices.gpus: the counts in
	// virtstation.io/gpus and the `*/gpu` quantities in domain.resources,
	// together. It also bounds each count, and so the number of entries
	// in virtstation.io/gpus. KubeVirt v1.9.0 sets no maximum on gpus[]
	// (schema.go: listType=atomic, no maxItems); 16 is the most GPUs one
	// host carries (HGX-class 16-GPU servers), and each entry is a PCIe
	// device of the guest.
	MaxGPUs = 16

	// MaxDataDisks bounds the entries of virtstation.io/data-disks. Each
	// becomes a disk and a volume, and a cloud-init mount.
	MaxDataDisks = 16

	// MaxDisks is KubeVirt v1.9.0's limit on
	// spec.template.spec.domain.devices.disks, and MaxVolumes on
	// spec.template.spec.volumes (maxItems 256 in its CRD schema, formerly
	// arrayLenMax in the VMI create admitter). The data disks and the
	// cloud-init volume the webhook adds must stay within them.
	MaxDisks   = 256
	MaxVolumes = 256

	// MaxAccessCredentials is KubeVirt v1.9.0's limit on
	// spec.template.spec.accessCredentials (maxItems 256); the SSH-key
	// step adds one.
	MaxAccessCredentials = 256

	// MaxInlineUserData is KubeVirt's limit on inline cloud-init
	// user-data (cloudInitUserMaxLen in the VMI create admitter). Merged
	// user-data larger than this goes into a per-VM Secret instead.
	MaxInlineUserData = 2048

	// MaxUserDataBytes bounds the merged cloud-init user-data (the user's
	// own and Virtstation's part): it is stored in one Secret key, and a
	// Secret holds at most 1 MiB of data (corev1 MaxSecretSize).
	MaxUserDataBytes = 1 << 20

	// MaxUserDataAnnotationBytes bounds virtstation.io/user-data, where the
	// webhook keeps the user's own inline user-data when the merge does not
	// fit inline (AnnotationUserData). Kubernetes allows 256 KiB for all of
	// an object's annotations, and kubectl's last-applied-configuration
	// holds a second copy of the same user-data: 64 KiB leaves room for
	// both and for other tools. Larger user-data belongs in a Secret of the
	// user's own, named in secretRef.
	MaxUserDataAnnotationBytes = 64 << 10
)
