#!/usr/bin/env bash
# kubevirt-admission.sh builds test/kvadmission (KubeVirt v1.9.0's own
# VirtualMachine and VirtualMachineInstance admission, run unchanged; see
# test/kvadmission/doc.go) once per machine and prints the binary's path.
# It is a module of its own; its first build compiles kubevirt.io/kubevirt's
# dependency tree, which takes a few minutes on 2 cores. The binary lands in
# a cache directory keyed by the KubeVirt version and a hash of the module's
# files (stand-ins included), so any clone with the same sources reuses it.
#
# Usage: hack/kubevirt-admission.sh   builds if needed, prints the binary's path
# Env:   VIRTSTATION_CACHE            cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
set -euo pipefail

SRC="$(cd "$(dirname "$0")/../test/kvadmission" && pwd)"
CACHE_ROOT="${VIRTSTATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtstation}"
KUBEVIRT_VERSION="$(awk '$1 == "require" && $2 == "kubevirt.io/kubevirt" { print $3; exit } $1 == "kubevirt.io/kubevirt" { print $2; exit }' "$SRC/go.mod")"
[ -n "$KUBEVIRT_VERSION" ] || { echo "kubevirt-admission: no kubevirt.io/kubevirt requirement in $SRC/go.mod" >&2; exit 1; }
# The hash covers what the build reads: go.mod, go.sum and the Go files.
HASH="$(cd "$SRC" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
DEST="${CACHE_ROOT}/kvadmission/${KUBEVIRT_VERSION}-${HASH}-$(go env GOOS)-$(go env GOARCH)"
BIN="$DEST/kvadmission"

if [ ! -x "$BIN" ]; then
  echo "kubevirt-admission: building KubeVirt ${KUBEVIRT_VERSION}'s admission code (first time takes a few minutes)" >&2
  mkdir -p "$DEST"
  # GOWORK=off: the module builds on its own go.mod, whatever workspace is around.
  (cd "$SRC" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp.$$" .)
  mv "$BIN.tmp.$$" "$BIN"
fi
echo "$BIN"
