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
$P train --config "$config" --resume "$@"
