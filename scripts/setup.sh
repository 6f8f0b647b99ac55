#!/usr/bin/env bash
# Installs the Debian packages the project needs (only when missing) and builds it (Release) into build/.
# Usage: scripts/setup.sh [--werror] [--sanitize] [--native]
# Every option is passed to CMake explicitly, so a build tree configured by one command (say the test command's
# --werror) never carries that choice into the next. The default build is portable (x86-64-v3 + run-time
# dispatch to the AVX-512 kernels); --native compiles everything for this CPU only.
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

werror=OFF; sanitize=OFF; native=OFF; btype=Release
for a in "$@"; do
  case "$a" in
    --werror) werror=ON ;;
    --sanitize) sanitize=ON; btype=RelWithDebInfo ;;
    --native) native=ON ;;
    *) echo "setup: unknown option $a (known: --werror --sanitize --native)" >&2; exit 2 ;;
  esac
done
flags=(-DCMAKE_BUILD_TYPE=$btype -DPAGEGRAM_WERROR=$werror -DPAGEGRAM_SANITIZE=$sanitize -DPAGEGRAM_NATIVE=$native)
cmake -S . -B build "${flags[@]}" >/dev/null
cmake --build build -j"$(nproc)"
