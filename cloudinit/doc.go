// Package cloudinit renders Virtstation's own cloud-config part (data-disk
// mounts and SSH keys) and merges it with a user's user-data without touching
// a byte of the user's data.
//
// # The part
//
// [Part.Render] produces a "#cloud-config" document with:
//   - merge_how, so that cloud-init, merging it after the user's own
//     cloud-config, appends lists and recurses into dicts instead of replacing
//     the user's bootcmd, runcmd or users;
//   - bootcmd: one `sh -c` entry running [MountScript] on every boot. For each
//     disk it waits for /dev/disk/by-id/virtio-<serial>, formats a
//     signature-free disk as ext4 (first use only), mounts an existing ext4
//     unchanged, and leaves partitioned or other-filesystem disks alone;
//   - runcmd: when an owner is set, a once-per-instance entry that gives the
//     mounts formatted before the owner's account existed to the owner
//     (cloud-init runs bootcmd before it creates users);
//   - ssh_authorized_keys, or users: [default, {name, ssh_authorized_keys}]
//     when the keys belong to a named account. cloud-init applies keys on the
//     first boot of an instance only.
//
// # The merged user-data
//
// [Merge] wraps the user's data and the part in a MIME multipart/mixed
// message, the user's part first. The user's bytes travel unchanged: as the
// body of a 7bit part when they are plain ASCII text, base64 otherwise, or, when
// they are themselves a MIME message (as cloud-init would read them), as a
// nested MIME entity. [Split] recovers the user's bytes exactly, so that a
// later admission re-renders only Virtstation's part.
//
// The format follows cloud-init 22.4 (Debian 12); the tests run the installed
// cloud-init's schema validator and its own user-data parser against it.
package cloudinit
