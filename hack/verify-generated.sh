#!/usr/bin/env bash
# verify-generated.sh regenerates the webhook manifests and the envtest CRDs
# into a scratch directory and fails when they differ from the committed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
CONTROLLER_GEN="${CONTROLLER_GEN:-bin/controller-gen}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$CONTROLLER_GEN" webhook paths="./webhooks/...;./claims/..." output:webhook:artifacts:config="$tmp/webhook"
CONTROLLER_GEN="$CONTROLLER_GEN" hack/gen-crds.sh "$tmp/crds"

status=0
diff -u config/webhook/manifests.yaml "$tmp/webhook/manifests.yaml" || status=1
diff -ru internal/testenv/crds "$tmp/crds" -x README.md -x '*.go' || status=1
if [ "$status" -ne 0 ]; then
  echo "generated files are stale: run 'make generate' and commit the result" >&2
fi
exit "$status"
