#!/usr/bin/env bash
# The test command: installs what is missing, builds (warnings are errors), runs the test suite once with
# the best kernels of this CPU and, when that is not AVX2, once more with the AVX2 kernels forced
# (PAGEGRAM_ISA=avx2): both passes check the same golden bits (tests/fixtures/golden).
# Its own build folder (build-test/, -Werror), so that switching between this and the main command (build/, no
# -Werror) never rebuilds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-test
bash scripts/setup.sh --werror --build-dir $B
echo "== $($B/pagegram --version | tail -1)"
ctest --test-dir $B --output-on-failure -LE slurm -j"$(nproc)"
if [ "$(PAGEGRAM_ISA=auto $B/pagegram --version | sed -n 's/^kernels: \([a-z0-9_]*\).*/\1/p')" != avx2 ]; then
  echo "== the same suite with the AVX2 kernels forced (PAGEGRAM_ISA=avx2; the source checks labelled isa_independent ran above)"
  PAGEGRAM_ISA=avx2 ctest --test-dir $B --output-on-failure -LE 'slurm|isa_independent' -j"$(nproc)"
fi
