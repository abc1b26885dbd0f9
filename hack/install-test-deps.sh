#!/usr/bin/env bash
# install-test-deps.sh installs the Debian packages the tests run for real:
#   cloud-init  validates rendered cloud-config and parses merged user-data
#   fdisk       sfdisk writes a partition table in the data-disk script tests
#   qemu-system-x86   a real RFB server and serial line for the bridge tests
#   openssh-server    a real sshd for the bridge's SSH tests
# It installs only what is missing, so a prepared machine pays nothing.
set -euo pipefail
packages=(cloud-init fdisk qemu-system-x86 openssh-server)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
