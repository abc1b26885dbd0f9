package cloudinit

import (
	_ "embed" // mountdisk.sh
	"strings"
)

// ownerPendingMarker is left in the root of a freshly formatted mount whose
// owner had no account yet; the runcmd entry chowns the mount and removes it.
const ownerPendingMarker = ".virtstation-owner-pending"

// mountDiskScript, the head of every mount script, defines the per-disk
// function mount_disk. It is a real sh file, mountdisk.sh, that the script
// embeds byte for byte. Environment:
//   - VIRTSTATION_BYID_DIR replaces /dev/disk/by-id (tests);
//   - VIRTSTATION_WAIT_SECONDS replaces the 120 s budget for disks to appear.
//
// The budget is shared by all disks: they are attached together, so a second
// missing disk does not add another two minutes to the boot.
//
// blkid -p probes the device itself (no cache) and exits 2 when it finds no
// signature at all: only then is the disk formatted. Anything else it finds
// other than a bare ext4 (a partition table, another filesystem, an ambivalent
// result) and any probe failure leave the disk alone. The script never fails
// the boot: every problem is reported on stderr and the next disk is tried.
//
// The file sets MARKER to ownerPendingMarker (TestMountDiskScriptMarker).
// Indentation is spaces: YAML cannot hold tabs in a block scalar.
//
//go:embed mountdisk.sh
var mountDiskScript string

// MountScript returns the POSIX sh script run by bootcmd on every boot (exported for tests and for `virtstation render` users to read).
//
// For each mount, in order, it waits for the disk, formats it as ext4 when it
// carries no signature at all, mounts it with -t ext4 unless the path is
// already a mountpoint, and gives a freshly formatted mount to owner (or marks
// it for the runcmd entry when owner has no account yet). Every value is
// single-quoted: no serial, path or owner can inject shell. Values must not
// contain NUL, which no shell argument can hold; [Part.Render] rejects them.
//
// The script never exits non-zero, so it never fails cloud-init's bootcmd: a
// disk that does not appear within 120 s (shared by all disks), or that holds a
// partition table or a filesystem other than ext4, is reported on stderr and
// skipped. The environment variables VIRTSTATION_BYID_DIR (instead of
// /dev/disk/by-id) and VIRTSTATION_WAIT_SECONDS (instead of 120) exist for
// tests. The guest needs util-linux (blkid, mount, mountpoint), e2fsprogs
// (mkfs.ext4), sed and coreutils, as every cloud image has.
func MountScript(mounts []Mount, owner string) string {
	var b strings.Builder
	b.WriteString(mountDiskScript)
	b.WriteByte('\n')
	for _, m := range mounts {
		b.WriteString("mount_disk ")
		b.WriteString(shellQuote(m.Serial))
		b.WriteByte(' ')
		b.WriteString(shellQuote(m.Path))
		b.WriteByte(' ')
		b.WriteString(shellQuote(owner))
		b.WriteByte('\n')
	}
	b.WriteString("exit 0\n")
	return b.String()
}

// chownPendingScript returns the runcmd script that, once the accounts exist,
// gives every mount that bootcmd marked to owner and removes the marker. It
// never fails: runcmd's status is the last entry's, and a missing account is
// reported, not fatal.
func chownPendingScript(mounts []Mount, owner string) string {
	var b strings.Builder
	b.WriteString("# Virtstation: give data disks formatted before the account existed to their owner.\n")
	b.WriteString("owner=" + shellQuote(owner) + "\n")
	b.WriteString("for path in")
	for _, m := range mounts {
		b.WriteByte(' ')
		b.WriteString(shellQuote(m.Path))
	}
	b.WriteString("; do\n")
	b.WriteString(`  [ -f "$path/` + ownerPendingMarker + `" ] || continue
  if ! id -u "$owner" >/dev/null 2>&1; then
    printf 'virtstation: no account %s: %s left to root\n' "$owner" "$path" >&2
  elif chown "$owner:" "$path"; then
    rm -f "$path/` + ownerPendingMarker + `"
  fi
done
exit 0
`)
	return b.String()
}

// shellQuote returns s as one single-quoted sh word: inside single quotes
// nothing is special, and each embedded quote is closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
