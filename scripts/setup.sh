#!/usr/bin/env bash
# Installs the Debian packages the project needs (only when missing) and builds it (Release) into build/.
# Usage: scripts/setup.sh [--werror] [--sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config git libeigen3-dev libhdf5-dev libyaml-cpp-dev libsentencepiece-dev
          sentencepiece libgtest-dev libcli11-dev liburing-dev python3 python3-h5py python3-matplotlib
          python3-numpy python3-yaml)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

flags=(-DCMAKE_BUILD_TYPE=Release)
for a in "$@"; do
  case "$a" in
    --werror) flags+=(-DPAGEGRAM_WERROR=ON) ;;
    --sanitize) flags+=(-DPAGEGRAM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    *) echo "setup: unknown option $a (known: --werror --sanitize)" >&2; exit 2 ;;
  esac
done
cmake -S . -B build "${flags[@]}" >/dev/null
cmake --build build -j"$(nproc)"
