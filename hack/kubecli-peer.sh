#!/usr/bin/env bash
# kubecli-peer.sh builds test/kubecli (kubecli-peer: virtctl's console, vnc,
# screenshot and version calls through kubevirt.io/client-go's kubecli) once
# per machine and prints the binary's path. It is a module of its own (see
# test/kubecli/doc.go), and its first build compiles client-go's dependency
# tree, which takes a few minutes on 2 cores; the binary lands in a cache
# directory keyed by the client-go version and a hash of the module's files,
# so any clone with the same sources reuses it.
#
# Usage: hack/kubecli-peer.sh        builds if needed, prints the binary's path
# Env:   VIRTSTATION_CACHE           cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
set -euo pipefail

SRC="$(cd "$(dirname "$0")/../test/kubecli" && pwd)"
CACHE_ROOT="${VIRTSTATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtstation}"
CLIENT_GO_VERSION="$(awk '$1 == "kubevirt.io/client-go" { print $2; exit }' "$SRC/go.mod")"
[ -n "$CLIENT_GO_VERSION" ] || { echo "kubecli-peer: no kubevirt.io/client-go requirement in $SRC/go.mod" >&2; exit 1; }
# The hash covers what the build reads: go.mod, go.sum and the Go files.
HASH="$(cd "$SRC" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
DEST="${CACHE_ROOT}/kubecli-peer/${CLIENT_GO_VERSION}-${HASH}-$(go env GOOS)-$(go env GOARCH)"
BIN="$DEST/kubecli-peer"

if [ ! -x "$BIN" ]; then
  echo "kubecli-peer: building against kubevirt.io/client-go ${CLIENT_GO_VERSION} (first time takes a few minutes)" >&2
  mkdir -p "$DEST"
  # GOWORK=off: the module builds on its own go.mod, whatever workspace is around.
  (cd "$SRC" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp.$$" .)
  mv "$BIN.tmp.$$" "$BIN"
fi
echo "$BIN"
