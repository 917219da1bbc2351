#!/usr/bin/env bash
# Installs the Debian packages listed in tools/packages.txt that are missing.
# As root it uses apt-get; otherwise it prints the command to run.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t wanted < <(grep -v -e '^#' -e '^$' tools/packages.txt)
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "pg_decoupled needs these packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
