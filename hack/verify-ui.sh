#!/usr/bin/env bash
# verify-ui.sh builds the browser client from web/ (npm ci and npm run build,
# as `make ui` does) into a scratch copy of the tree and fails when the result
# differs from the committed bridge/ui/dist, which bridge/ui embeds so that
# `go build` never needs npm. The build is reproducible: the same sources and
# lockfile give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# build.mjs writes ../bridge/ui/dist relative to itself: a copy of web/ in
# $tmp/web builds into $tmp/bridge/ui/dist.
mkdir -p "$tmp/web" "$tmp/bridge/ui"
tar -C web --exclude=node_modules -cf - . | tar -C "$tmp/web" -xf -
(cd "$tmp/web" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run --silent build >/dev/null)

if ! diff -ru bridge/ui/dist "$tmp/bridge/ui/dist"; then
  echo "bridge/ui/dist is stale: run 'make ui' and commit the result" >&2
  exit 1
fi
