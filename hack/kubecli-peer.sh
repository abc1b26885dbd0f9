#!/usr/bin/env bash
# kubecli-peer.sh builds test/kubecli (kubecli-peer: virtctl's console, vnc,
# screenshot and version calls through kubevirt.io/client-go's kubecli) once
# per machine and prints the binary's path. It is a module of its own (see
# test/kubecli/doc.go), and its first build compiles client-go's dependency
# tree, which takes a few minutes on 2 cores; see hack/cached-module-build.sh
# for the cache.
#
# Usage: hack/kubecli-peer.sh        builds if needed, prints the binary's path
# Env:   VIRTSTATION_CACHE           cache root (default: $XDG_CACHE_HOME or ~/.cache, /virtstation)
set -euo pipefail
ABOUT="3 to 6 minutes on 2 cores" exec "$(dirname "$0")/cached-module-build.sh" test/kubecli kubecli-peer kubevirt.io/client-go
