#!/usr/bin/env bash
# envtest-bins.sh builds the control-plane binaries the tests and the demo run
# (kube-apiserver and etcd, and kubectl for the install page's commands) from
# the Go module proxy, because no download site
# for envtest binaries is reachable here. The binaries land in a cache directory
# keyed by version, so a machine builds them once, whatever clone asks.
#
# Usage: hack/envtest-bins.sh        builds if needed, prints the directory
# Env:   VIRTSTATION_CACHE           cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
#        KUBE_VERSION, ETCD_VERSION  override the pinned versions
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
STAGING_VERSION="0.${KUBE_VERSION#1.}"
CACHE_ROOT="${VIRTSTATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtstation}"
DEST="${CACHE_ROOT}/envtest/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}-$(go env GOOS)-$(go env GOARCH)"

log() { echo "envtest-bins: $*" >&2; }

# build_kube CMD ABOUT builds k8s.io/kubernetes/cmd/CMD (kube-apiserver, or
# kubectl, which envtest's binary sets carry too and the install tests run).
build_kube() {
  local cmd="$1" about="$2" work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "building $cmd v${KUBE_VERSION} (once per machine: $about)"
  SECONDS=0
  (
    cd "$work"
    go mod init virtstation.local/envtest-kube >/dev/null 2>&1
    local modfile
    modfile="$(go mod download -json "k8s.io/kubernetes@v${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    # k8s.io/kubernetes replaces every staging module with ./staging/...; a
    # consumer must pin the released staging modules of the same version.
    {
      echo "require k8s.io/kubernetes v${KUBE_VERSION}"
      grep -E '=> \./staging/' "$modfile" | awk -v v="v${STAGING_VERSION}" '{print "replace " $1 " => " $1 " " v}'
    } >>go.mod
    printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/%s"\n' "$cmd" >tools.go
    go mod tidy >/dev/null
    # Stamped as a release is, so the server reports v${KUBE_VERSION} (in
    # /version, which Helm checks a chart's kubeVersion against) instead of
    # v0.0.0-master.
    local v="k8s.io/component-base/version"
    local minor="${KUBE_VERSION#*.}"
    minor="${minor%%.*}"
    CGO_ENABLED=0 go build -trimpath -ldflags "-X ${v}.gitVersion=v${KUBE_VERSION} -X ${v}.gitMajor=1 -X ${v}.gitMinor=${minor} -X ${v}.gitTreeState=clean" \
      -o "$DEST/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  )
  mv "$DEST/$cmd.tmp" "$DEST/$cmd"
  log "built $cmd in $((SECONDS / 60)) min $((SECONDS % 60)) s"
}

build_etcd() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "building etcd v${ETCD_VERSION} (about 1 minute)"
  SECONDS=0
  (
    cd "$work"
    go mod init virtstation.local/envtest-etcd >/dev/null 2>&1
    echo "require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}" >>go.mod
    printf 'package tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
    go mod tidy >/dev/null
    CGO_ENABLED=0 go build -trimpath -o "$DEST/etcd.tmp" go.etcd.io/etcd/server/v3
  )
  mv "$DEST/etcd.tmp" "$DEST/etcd"
  log "built etcd in $((SECONDS / 60)) min $((SECONDS % 60)) s"
}

mkdir -p "$DEST"
[ -x "$DEST/etcd" ] || build_etcd
# A binary from before the version stamp reports v0.0.0-master: rebuild it.
stamped() { "$DEST/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes v${KUBE_VERSION}"; }
[ -x "$DEST/kube-apiserver" ] && stamped || build_kube kube-apiserver "about 8 minutes on 2 cores"
[ -x "$DEST/kubectl" ] || build_kube kubectl "about 1 minute after kube-apiserver"
echo "$DEST"
