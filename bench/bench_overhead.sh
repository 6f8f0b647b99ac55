#!/usr/bin/env bash
# Memory-table overhead against no table at shape A or B: `pagegram bench overhead` on the presets, i.e. one backbone
# in one process taking one optimizer step with each variant in turn (the order rotated every round), round after
# round, so the variants of a round run seconds apart and the slow phases of a shared VM hit them alike.
# Reported per variant: tok/s (median, min-max), the overhead against the first variant as the median (min-max) of
# the per-round overheads, and the memory's own work as a share of its step time (phase timers), then the phases.
# Usage: bench/bench_overhead.sh [--shape A|B] [--rounds R] [--warmup W] [--memory none,flat,engram,pagegram_s4]
#                                [--precision fp32|bf16|autocast]   (PAGEGRAM=<binary> measures that build as it is)
#   presets: configs/a/<v>.yaml (200M-param tables), configs/b/<v>.yaml (10M); same step sizes as bench_vs_torch.sh.
# Needs a quiet machine for tight figures (a sweep or a build beside it shifts every number); timings are
# reported, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
shape=B
rounds=20
warmup=2
memories=none,flat,engram,pagegram_s4
precision=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) shape="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --memory) memories="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_overhead: unknown option $1 (hint: --help)" >&2; exit 2 ;;
  esac
done
case "$shape" in
  A) dir=configs/a; sets=(--set train.tokens_per_step=4096 --set train.micro_batch=4) ;;
  B) dir=configs/b; sets=(--set train.tokens_per_step=8192 --set train.micro_batch=32) ;;
  *) echo "bench_overhead: unknown shape $shape (hint: A or B)" >&2; exit 2 ;;
esac
case "$precision" in
  fp32|bf16|autocast) sets+=(--set "train.precision=$precision") ;;
  *) echo "bench_overhead: unknown precision $precision (hint: fp32, bf16 or autocast)" >&2; exit 2 ;;
esac
IFS=, read -ra mem_list <<< "$memories"
configs=()
for mem in "${mem_list[@]}"; do
  [ -f "$dir/$mem.yaml" ] || { echo "bench_overhead: no preset $dir/$mem.yaml (hint: --memory takes names of $dir)" >&2; exit 2; }
  configs+=(--config "$dir/$mem.yaml")
done
P=${PAGEGRAM:-build/pagegram}
[ -x "$P" ] || bash scripts/setup.sh >/dev/null
exec "$P" bench overhead "${configs[@]}" "${sets[@]}" --rounds "$rounds" --warmup "$warmup"
