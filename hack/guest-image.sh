#!/usr/bin/env bash
# guest-image.sh builds the Debian guest the end-to-end tests and `make demo`
# boot (see internal/virtlauncher): debootstrap of Debian bookworm from the
# machine's own Debian mirror, nothing downloaded from anywhere else. It
# prints the cache directory, which holds:
#   vmlinuz, initrd.img  the guest kernel and initramfs (booted with -kernel)
#   root.ext4            the root filesystem, label vsroot (mkfs.ext4 -d, no
#                        loop mount); boots use a copy-on-write overlay of it
#   packages             what is in it (dpkg-query), for the curious
# The directory is keyed by a hash of this script without its comments (its
# package list and guest configuration are the whole recipe), so a machine
# builds it once (about 3 minutes on 2 cores, about 850 MB) until the
# recipe changes. Builds
# not used for 7 days are pruned. Needs root (debootstrap, chroot) and the
# Debian packages debootstrap and e2fsprogs; run by `make guest-image`.
#
# Usage: hack/guest-image.sh     builds if needed, prints the directory
# Env:   VIRTSTATION_CACHE       cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
set -euo pipefail

SUITE=bookworm
# The guest's packages. The generic kernel, as in Debian's generic images
# and KubeVirt's containerdisks: the cloud kernel has no AHCI driver, so a
# sata disk or cdrom (KubeVirt's default bus for some disks) would be
# invisible. dbus lets systemd-logind power off on the ACPI button, which
# is how KubeVirt stops a VM gracefully. cloud-init alone fails to
# configure python3-cryptography under debootstrap (a virtual package);
# naming python3-cffi-backend resolves it.
PACKAGES=(
  linux-image-amd64 systemd-sysv udev dbus
  cloud-init python3-cffi-backend
  openssh-server qemu-guest-agent sudo
  e2fsprogs util-linux iproute2
)
LABEL=vsroot
ROOT_SIZE=2G

CACHE_ROOT="${VIRTSTATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtstation}"
HASH="$(grep -v '^[[:space:]]*#' "$0" | sha256sum | cut -c1-16)"
DEST="${CACHE_ROOT}/guest/${SUITE}-${HASH}"

log() { echo "guest-image: $*" >&2; }

# mirror reads the machine's Debian mirror from its apt sources (deb822 or
# one-line form); the repository never names one.
mirror() {
  local uri
  uri="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "'"$SUITE"'") { print u; exit } }')"
  if [ -z "$uri" ]; then
    uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" && $3 == "'"$SUITE"'" { print $2; exit }')"
  fi
  [ -n "$uri" ] || { log "no Debian $SUITE mirror in /etc/apt/sources.list*"; exit 1; }
  echo "$uri"
}

# configure makes the tree a cloud guest as KubeVirt users run one: NoCloud
# only, a serial and a VGA console, DHCP on the first NIC, no timers that
# would compete with the tests for the CPU.
configure() {
  local root="$1"
  echo "LABEL=$LABEL / ext4 defaults,errors=remount-ro 0 1" >"$root/etc/fstab"
  echo virtstation-guest >"$root/etc/hostname"
  # KubeVirt presents cloud-init as a NoCloud volume labelled cidata;
  # skipping the other datasources' probes saves boot time under TCG.
  cat >"$root/etc/cloud/cloud.cfg.d/90-virtstation.cfg" <<'EOF'
datasource_list: [NoCloud, None]
# One host key type: RSA generation is slow under TCG.
ssh_genkeytypes: [ed25519]
# The image has no locales package; C.UTF-8 is built in.
locale: false
EOF
  # cloud-init renders the NIC's DHCP for systemd-networkd when no ifupdown
  # or netplan is installed; networkd must run for it.
  chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
  for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer \
    systemd-networkd-wait-online.service; do
    chroot "$root" systemctl mask "$unit" >/dev/null 2>&1 || true
  done
  # The image's own host keys would be every guest's; cloud-init makes new
  # ones per instance.
  rm -f "$root"/etc/ssh/ssh_host_*
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
}

build() {
  local work root
  work="$(mktemp -d "${CACHE_ROOT}/guest/.build-XXXXXX")"
  trap 'umount -R "'"$work"'/root/proc" 2>/dev/null || true; rm -rf "'"$work"'"' RETURN
  root="$work/root"
  local uri
  uri="$(mirror)"
  log "debootstrap $SUITE from $uri into $root (about 3 minutes on 2 cores; progress below)"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$SUITE" "$root" "$uri" |
    sed -u 's/^/guest-image: debootstrap: /' >&2
  configure "$root"
  cp -L "$root/vmlinuz" "$work/vmlinuz"
  cp -L "$root/initrd.img" "$work/initrd.img"
  chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' >"$work/packages"
  log "mkfs.ext4 -d $root ($ROOT_SIZE, sparse)"
  mkfs.ext4 -q -L "$LABEL" -d "$root" "$work/root.ext4" "$ROOT_SIZE"
  rm -rf "$root"
  mv "$work" "$DEST"
}

if [ ! -f "$DEST/root.ext4" ]; then
  command -v debootstrap >/dev/null || { log "needs debootstrap (apt-get install debootstrap)"; exit 1; }
  [ "$(id -u)" -eq 0 ] || { log "debootstrap needs root; run: sudo $0"; exit 1; }
  mkdir -p "${CACHE_ROOT}/guest"
  # Everything the build prints is progress: stdout carries only the
  # directory (mkfs.ext4 prints "Creating regular file …" there).
  build >&2
  log "built in $DEST in $((SECONDS / 60)) min $((SECONDS % 60)) s"
fi
# The image's mtime is its last use; other builds unused for a week go.
touch "$DEST/root.ext4"
find "${CACHE_ROOT}/guest" -mindepth 2 -maxdepth 2 -name root.ext4 -mtime +7 -printf '%h\0' | xargs -0 -r rm -rf
echo "$DEST"
