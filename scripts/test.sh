#!/usr/bin/env bash
# The test command: installs what is missing, builds (warnings are errors), runs the test suite once with
# the best kernels of this CPU and, when that is not AVX2, once more with the AVX2 kernels forced
# (PAGEGRAM_ISA=avx2): both passes check the same golden bits (tests/fixtures/golden).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --werror
echo "== $(build/pagegram --version | tail -1)"
ctest --test-dir build --output-on-failure -LE slurm -j"$(nproc)"
if [ "$(PAGEGRAM_ISA=auto build/pagegram --version | sed -n 's/^kernels: \([a-z0-9_]*\).*/\1/p')" != avx2 ]; then
  echo "== the same suite with the AVX2 kernels forced (PAGEGRAM_ISA=avx2)"
  PAGEGRAM_ISA=avx2 ctest --test-dir build --output-on-failure -LE slurm -j"$(nproc)"
fi
