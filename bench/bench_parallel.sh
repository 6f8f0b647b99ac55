#!/usr/bin/env bash
# Sweep throughput on this machine: one run with 2 threads vs two 1-thread runs at once (what `sweep run --parallel 2`
# does on 2 cores), steady state (`pagegram bench train` on the corpus: no evaluation, checkpoint or log), per layout
# and precision. The machine must be otherwise idle (stop sweeps first); timings are reported, not asserted.
# Usage: bench/bench_parallel.sh [--config configs/regime.yaml] [--steps 8] [--layouts flat,engram,pagegram_s4]
#                                  [--precisions fp32,bf16]
# Prints a Markdown table: tok/s of 1 thread alone, of 2 threads, of each of two 1-thread runs pinned to CPUs 0 and 1,
# and the pair's sum over the 2-thread figure (> 1: two runs at a time finish a sweep sooner).
set -euo pipefail
cd "$(dirname "$0")/.."
config=configs/regime.yaml; steps=8; layouts=flat,engram,pagegram_s4; precisions=fp32,bf16
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --precisions) precisions="$2"; shift 2 ;;
    *) echo "bench_parallel: unknown option $1 (known: --config --steps --layouts --precisions)" >&2; exit 2 ;;
  esac
done
bin=build/pagegram
[ -x "$bin" ] || { echo "bench_parallel: $bin is not built (hint: bash scripts/setup.sh)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "bench_parallel: needs 2 CPUs, this process may use $(nproc)" >&2; exit 1; }
cpus=($(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | while IFS=- read a b; do seq "$a" "${b:-$a}"; done | head -2))
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bench() {  # bench OUT CPUS THREADS LAYOUT PRECISION
  local sets=(--set "train.precision=$5" --set "train.threads=$3")
  case "$4" in
    pagegram_s*) sets+=(--set memory.layout=pagegram --set "memory.slots=${4#pagegram_s}") ;;
    *) sets+=(--set "memory.layout=$4") ;;
  esac
  taskset -c "$2" "$bin" bench train --config "$config" "${sets[@]}" --steps "$steps" --warmup 2 > "$1" 2>&1 ||
    { echo "bench_parallel: $bin bench train failed ($4, $5, $3 threads):" >&2; tail -3 "$1" >&2; exit 1; }
}
toks() { awk '/^tok\/s/ {print $2}' "$1"; }
echo "$("$bin" --version | sed -n 3p); Linux $(uname -r); $config, $steps timed steps"
echo
echo "| precision | layout | 1 thread alone | 2 threads | two 1-thread runs at once | pair / 2 threads |"
echo "|---|---|---:|---:|---:|---:|"
for prec in ${precisions//,/ }; do
  for lay in ${layouts//,/ }; do
    bench "$tmp/one" "${cpus[0]}" 1 "$lay" "$prec"
    bench "$tmp/two" "${cpus[0]},${cpus[1]}" 2 "$lay" "$prec"
    bench "$tmp/a" "${cpus[0]}" 1 "$lay" "$prec" & pa=$!
    bench "$tmp/b" "${cpus[1]}" 1 "$lay" "$prec" & pb=$!
    wait $pa; wait $pb
    one=$(toks "$tmp/one"); two=$(toks "$tmp/two"); a=$(toks "$tmp/a"); b=$(toks "$tmp/b")
    echo "| $prec | $lay | $one | $two | $a + $b = $((a + b)) | $(awk -v s=$((a + b)) -v t="$two" 'BEGIN {printf "%.2f", s / t}') |"
  done
done
