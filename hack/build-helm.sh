#!/usr/bin/env bash
# build-helm.sh builds the Helm CLI pinned in hack/tools/go.mod from the Go
# module proxy, with the version stamps Helm's own Makefile sets: without
# them `helm template` assumes Kubernetes v1.20 and refuses the chart's
# kubeVersion, and `helm version` is blank.
#
# Usage: hack/build-helm.sh [OUT]   (default bin/helm)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin/helm}"
pkg=helm.sh/helm/v3
helm_version="$(go list -modfile=hack/tools/go.mod -m -f '{{.Version}}' "$pkg")"
# Helm reports the Kubernetes minor version of the client-go it is built with.
k8s_minor="$(go list -modfile=hack/tools/go.mod -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
ldflags="-s -w -X $pkg/internal/version.version=$helm_version"
for p in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X $pkg/$p.k8sVersionMajor=1 -X $pkg/$p.k8sVersionMinor=$k8s_minor"
done
mkdir -p "$(dirname "$out")"
CGO_ENABLED=0 go build -modfile=hack/tools/go.mod -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg/cmd/helm"
mv "$out.tmp" "$out"
