# Virtstation: give data disks formatted before the account existed to their owner.
owner='alice'
for path in '/data' '/srv/projects'; do
  [ -f "$path/.virtstation-owner-pending" ] || continue
  if ! id -u "$owner" >/dev/null 2>&1; then
    printf 'virtstation: no account %s: %s left to root\n' "$owner" "$path" >&2
  elif chown "$owner:" "$path"; then
    rm -f "$path/.virtstation-owner-pending"
  fi
done
exit 0
