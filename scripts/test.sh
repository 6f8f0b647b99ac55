#!/usr/bin/env bash
# The test command: installs what is missing, builds (warnings are errors), runs the fast test suite.
# Slow tests (label "slow") run with: ctest --test-dir build -L slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --werror
ctest --test-dir build -LE slow --output-on-failure -j"$(nproc)"
