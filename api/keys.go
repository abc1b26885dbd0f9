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
)

// Annotations the webhooks write.
const (
	// AnnotationInjected records, as JSON, what the mutating webhook did.
	AnnotationInjected = "virtstation.io/injected"
)
