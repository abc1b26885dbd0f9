# Virtstation data disks: format a blank disk as ext4 on first use, mount on every boot.
BYID=${VIRTSTATION_BYID_DIR:-/dev/disk/by-id}
WAIT=${VIRTSTATION_WAIT_SECONDS:-120}
case $WAIT in ''|*[!0-9]*) WAIT=120 ;; esac
MARKER=.virtstation-owner-pending
waited=0

say() {
  printf 'virtstation: %s\n' "$*" >&2
}

# mount_disk SERIAL PATH OWNER
mount_disk() {
  dev=$BYID/virtio-$1
  path=$2
  owner=$3
  while [ ! -e "$dev" ]; do
    if [ "$waited" -ge "$WAIT" ]; then
      say "$dev did not appear within ${WAIT}s; $path not mounted"
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  if mountpoint -q "$path"; then
    return 0
  fi
  probe=$(blkid -p -o export "$dev")
  rc=$?
  fresh=
  case $rc in
  2)
    if ! mkfs.ext4 -q "$dev" </dev/null; then
      say "mkfs.ext4 $dev failed; $path not mounted"
      return 0
    fi
    fresh=1
    ;;
  0)
    pttype=$(printf '%s\n' "$probe" | sed -n 's/^PTTYPE=//p')
    fstype=$(printf '%s\n' "$probe" | sed -n 's/^TYPE=//p')
    if [ -n "$pttype" ]; then
      say "$dev has a partition table ($pttype): left alone, $path not mounted"
      return 0
    fi
    if [ "$fstype" != ext4 ]; then
      say "$dev holds ${fstype:-an unknown signature}, not ext4: left alone, $path not mounted"
      return 0
    fi
    ;;
  *)
    say "blkid -p $dev failed (exit $rc): left alone, $path not mounted"
    return 0
    ;;
  esac
  if ! mkdir -p "$path" || ! mount -t ext4 "$dev" "$path"; then
    say "mounting $dev at $path failed"
    return 0
  fi
  if [ -z "$fresh" ] || [ -z "$owner" ]; then
    return 0
  fi
  if id -u "$owner" >/dev/null 2>&1; then
    chown "$owner:" "$path" || say "chown $owner: $path failed"
  else
    # cloud-init runs bootcmd before it creates users: runcmd finishes the job.
    printf '%s\n' "$owner" >"$path/$MARKER" || say "cannot mark $path for $owner"
  fi
}
