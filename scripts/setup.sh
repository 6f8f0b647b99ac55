#!/usr/bin/env bash
# Installs the Debian packages the project needs (only when missing) and builds it (Release) into build/.
# Usage: scripts/setup.sh [--werror] [--sanitize] [--native] [--build-dir DIR]   (default build/)
# Every option is passed to CMake explicitly, so a build tree configured by one command (say the test command's
# --werror) never carries that choice into the next. The default build is portable (x86-64-v3 + run-time
# dispatch to the AVX-512 kernels); --native compiles everything for this CPU only.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config git libeigen3-dev libhdf5-dev libyaml-cpp-dev libsentencepiece-dev
          sentencepiece libgtest-dev libcli11-dev liburing-dev python3 python3-h5py python3-matplotlib
          python3-numpy python3-yaml libopenmpi-dev openmpi-bin clang-format-14 libcpp-httplib-dev
          nlohmann-json3-dev python3-torch)  # python3-torch: the PyTorch mirror of the model (tests/train/torch_mirror.py)
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

werror=OFF; sanitize=OFF; native=OFF; btype=Release; bdir=build
while [ $# -gt 0 ]; do
  case "$1" in
    --werror) werror=ON ;;
    --sanitize) sanitize=ON; btype=RelWithDebInfo ;;
    --native) native=ON ;;
    --build-dir) [ $# -ge 2 ] || { echo "setup: --build-dir needs a folder" >&2; exit 2; }; bdir="$2"; shift ;;
    *) echo "setup: unknown option $1 (known: --werror --sanitize --native --build-dir DIR)" >&2; exit 2 ;;
  esac
  shift
done
flags=(-DCMAKE_BUILD_TYPE=$btype -DPAGEGRAM_WERROR=$werror -DPAGEGRAM_SANITIZE=$sanitize -DPAGEGRAM_NATIVE=$native)
cmake -S . -B "$bdir" "${flags[@]}" >/dev/null
cmake --build "$bdir" -j"$(nproc)"
