#!/usr/bin/env bash
# Trains the same presets with two pagegram binaries and compares their checkpoints and logs bit for bit
# (tools/compare_runs.py): the proof that a refactor left results unchanged.
#
#   tools/compare_revisions.sh OLD_BINARY NEW_BINARY [OUT_DIR]
#
# Presets: configs/tiny.yaml on the fixture corpus with memory.layout none / flat / engram / pagegram (full runs, 64 steps) and
# the same in bf16 (flat / engram / pagegram), and configs/regime.yaml with PageGram S=4 (fp32) and Engram-style (bf16)
# for 3 steps each (--stop-after 3; needs its corpus: scripts/main.sh builds it; SKIP_REGIME=1 leaves them out).
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); out=${3:-/tmp/pagegram_compare}
cd "$(dirname "$0")/.."
rm -rf "$out"; mkdir -p "$out"
status=0
run() {  # name, extra args...
  local name=$1; shift
  for which in old new; do
    local bin=$old; [[ $which == new ]] && bin=$new
    "$bin" train "$@" --set train.out_dir="$out/$which/$name" >"$out/$which.$name.out" 2>&1 ||
      { echo "$name: $which binary failed (see $out/$which.$name.out)"; return 1; }
  done
  echo "== $name"
  /usr/bin/python3 tools/compare_runs.py "$out/old/$name" "$out/new/$name" || status=1
}
# configs/tiny.yaml on the fixture corpus, as the tests run it (tests/test_util.h tiny_fixture_sets)
tiny=(--config configs/tiny.yaml --set data.corpus="$PWD/tests/fixtures/corpus" --set data.cache_dir="$out/cache"
      --set tokenizer.input_sentence_size=4000 --set data.val_tokens=2048)
"$new" data tokenize "${tiny[@]}" >"$out/tokenize.out" 2>&1 || { echo "tiny data: see $out/tokenize.out"; exit 1; }
for layout in none flat engram pagegram; do
  run "tiny_$layout" "${tiny[@]}" --set memory.layout=$layout
done
for layout in flat engram pagegram; do  # bf16 (train.precision), as regime_stage2 trains
  run "tiny_${layout}_bf16" "${tiny[@]}" --set memory.layout=$layout --set train.precision=bf16
done
if [[ -z ${SKIP_REGIME:-} ]]; then
  run regime_pagegram_s4 --config configs/regime.yaml --set memory.layout=pagegram --set memory.slots=4 --stop-after 3
  run regime_engram_bf16 --config configs/regime.yaml --set memory.layout=engram --set train.precision=bf16 --stop-after 3
fi
exit $status
