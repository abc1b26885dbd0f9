#!/usr/bin/env bash
# install-test-deps.sh installs the Debian packages the tests run for real:
#   cloud-init  validates rendered cloud-config and parses merged user-data
#   fdisk       sfdisk writes a partition table in the data-disk script tests
#   qemu-system-x86   a real RFB server and serial line for the bridge tests
#   openssh-server    a real sshd for the bridge's SSH tests
#   chromium          a real headless browser for the built-in client's tests
#   fonts-dejavu-core a font for the browser's terminal
#   websockify        the peer of the bridge in the VNC relay benchmark
#   debootstrap       builds the Debian guest image (hack/guest-image.sh)
#   xorriso           xorrisofs writes the guest's NoCloud ISO, as virt-launcher does
#   nginx             KubeVirt Manager's proxy in front of the bridge, with the
#                     shipped recipe (Debian 12's nginx 1.22, which has the ssl
#                     module; nginx-light there is the same package plus the
#                     echo module), run by the tests as an ordinary process
# It installs only what is missing, so a prepared machine pays nothing.
# With --demo it installs only what `make demo`'s guest needs.
set -euo pipefail
packages=(cloud-init fdisk qemu-system-x86 debootstrap xorriso openssh-server chromium fonts-dejavu-core websockify nginx)
if [ "${1:-}" = --demo ]; then
  packages=(qemu-system-x86 debootstrap e2fsprogs xorriso)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# playwright-core drives Debian's Chromium in the browser tests; npm ci
# installs the locked version (it downloads no browser).
npm_deps() {
  local dir
  dir="$(dirname "$0")/../test/bridge/browser"
  if [ ! -d "$dir/node_modules/playwright-core" ]; then
    echo "install-test-deps: npm ci in test/bridge/browser" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}
if [ "${1:-}" = --demo ]; then
  npm_deps() { :; }
fi
if [ "${#missing[@]}" -eq 0 ]; then
  npm_deps
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
