#!/usr/bin/env bash
# cached-module-build.sh builds a Go module of its own in this repository
# (test/kubecli, test/kvadmission) once per machine and prints the binary's
# path. The binary lands in a cache directory keyed by the version of the
# module's main dependency and a hash of the module's files (go.mod, go.sum
# and every .go file, stand-ins included), so any clone with the same
# sources reuses it. Builds of the same name not used for 7 days are pruned.
#
# Usage: hack/cached-module-build.sh SRC_DIR NAME VERSION_MODULE
#   SRC_DIR         the module's directory (relative to the repository root)
#   NAME            the binary's and the cache directory's name
#   VERSION_MODULE  the dependency whose version keys the cache
# Env:   VIRTSTATION_CACHE  cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
#        ABOUT              how long a first build takes, for the progress line
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 SRC_DIR NAME VERSION_MODULE" >&2; exit 2; }
SRC="$(cd "$(dirname "$0")/../$1" && pwd)"
NAME="$2"
MODULE="$3"
CACHE_ROOT="${VIRTSTATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtstation}"
VERSION="$(awk -v m="$MODULE" '($1 == "require" && $2 == m) { print $3; exit } $1 == m { print $2; exit }' "$SRC/go.mod")"
[ -n "$VERSION" ] || { echo "$NAME: no $MODULE requirement in $SRC/go.mod" >&2; exit 1; }
HASH="$(cd "$SRC" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
DEST="${CACHE_ROOT}/${NAME}/${VERSION}-${HASH}-$(go env GOOS)-$(go env GOARCH)"
BIN="$DEST/$NAME"

if [ ! -x "$BIN" ]; then
  echo "$NAME: building against $MODULE ${VERSION} (once per machine: ${ABOUT:-a few minutes})" >&2
  mkdir -p "$DEST"
  SECONDS=0
  # GOWORK=off: the module builds on its own go.mod, whatever workspace is around.
  (cd "$SRC" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp.$$" .)
  mv "$BIN.tmp.$$" "$BIN"
  echo "$NAME: built in $((SECONDS / 60)) min $((SECONDS % 60)) s" >&2
fi
# The binary's mtime is its last use; other builds unused for a week go.
touch "$BIN"
find "${CACHE_ROOT}/${NAME}" -mindepth 2 -maxdepth 2 -type f -name "$NAME" -mtime +7 -printf '%h\0' |
  xargs -0 -r rm -rf
echo "$BIN"
