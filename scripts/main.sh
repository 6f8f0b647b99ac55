#!/usr/bin/env bash
# The main job on a fresh machine: install + build, build the corpus and tokenizer (cached), train the
# default small experiment (shape B, a few minutes) and print its held-out loss.
# Usage: scripts/main.sh [CONFIG] [--set key=value ...]     (default CONFIG: configs/shape_b.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-configs/shape_b.yaml}"
shift || true
bash scripts/setup.sh
P=build/pagegram
echo "== corpus (cached after the first run)" >&2
$P data corpus --config "$config" "$@"
echo "== tokenizer + token stores (cached)" >&2
$P data tokenize --config "$config" "$@"
echo "== training $config" >&2
# A run stopped before its first checkpoint has nothing to resume from: `train --resume` refuses such a directory
# (a resume never silently restarts), and the main command starts that run over (its own run directory).
out=$($P config show "$config" "$@" | sed -n 's/^  out_dir: //p' | head -1)
if [ -n "$out" ] && [ -e "$out/log.h5" ] && [ ! -e "$out/checkpoint.h5" ]; then
  echo "main: $out was stopped before its first checkpoint: starting it over" >&2
  rm -f "$out/log.h5"
fi
$P train --config "$config" --resume "$@"
