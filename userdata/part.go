package userdata

import (
	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
)

// Part is Virtstation's cloud-config part for a VM: a mount for each data
// disk of rec that is a writable disk with a mount path, owned by owner
// (virtstation.io/ssh-user), and keys, the namespace's SSH keys when they
// go through cloud-init. The webhook and the Reconciler both build the part
// through it; the webhook never has keys.
func Part(rec api.Injected, owner string, keys []string) cloudinit.Part {
	part := cloudinit.Part{Owner: owner, AuthorizedKeys: keys}
	for _, d := range rec.DataDisks {
		if Mounted(d) {
			part.Mounts = append(part.Mounts, cloudinit.Mount{Serial: d.Serial, Path: d.MountPath})
		}
	}
	return part
}

// Mounted reports whether the data disk d is mounted through cloud-init: a
// writable disk (not a cdrom) with a mount path. A read-only disk cannot be
// formatted on first use, so it is attached but not mounted.
func Mounted(d api.InjectedDisk) bool {
	return d.MountPath != "" && d.Type == string(api.DiskTypeDisk) && !d.ReadOnly
}
