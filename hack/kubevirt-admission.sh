#!/usr/bin/env bash
# kubevirt-admission.sh builds test/kvadmission (KubeVirt v1.9.0's own
# VirtualMachine and VirtualMachineInstance admission, run unchanged; see
# test/kvadmission/doc.go) once per machine and prints the binary's path.
# Its first build compiles kubevirt.io/kubevirt's dependency tree, which
# takes a few minutes on 2 cores; see hack/cached-module-build.sh for the
# cache.
#
# Usage: hack/kubevirt-admission.sh   builds if needed, prints the binary's path
# Env:   VIRTSTATION_CACHE            cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
set -euo pipefail
ABOUT="3 to 6 minutes on 2 cores" exec "$(dirname "$0")/cached-module-build.sh" test/kvadmission kvadmission kubevirt.io/kubevirt
