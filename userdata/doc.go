// Package userdata writes the per-VM cloud-init user-data Secret,
// "<vm>-userdata", from the stored VirtualMachine.
//
// The mutating webhook computes and writes nothing. When the user's own
// user-data and Virtstation's cloud-config part (data-disk mounts, SSH keys
// for cloudInit propagation) cannot sit inline in the VM, the webhook points
// the VM's cloud-init volume at "<vm>-userdata" and keeps the user's own
// source in the virtstation.io/user-data annotation (api.UserCloudInit). The
// Reconciler here reads the stored VM, the user's own Secret when the source
// names one (in the VM's namespace, as KubeVirt would read it) and the
// namespace's SSH key Secrets, merges them (cloudinit.Merge) and writes the
// Secret, controlled by the VM. Until it exists, KubeVirt's launcher pod
// waits for it (the kubelet retries the Secret volume mount).
//
// The decisions are pure functions: Source (does the VM need the Secret, and
// where is the user's own part), Part (Virtstation's part from the VM's
// record) and Desired (the Secret). The Reconciler only reads, compares and
// writes.
package userdata
