#!/usr/bin/env bash
# Memory-table overhead against no table, robust to the run-to-run noise of a shared VM: the variants are run
# interleaved (none, flat, engram, pagegram_s4, none, flat, ...) for R rounds, so slow phases of the machine hit every
# variant alike; reported per variant: median tok/s, min-max, the overhead of the median against the first variant's
# median, and the median (min-max) of the per-round overheads (each variant against the first variant of the same
# round, seconds apart: the figure least moved by the machine's slow drifts), and the memory's own work as a share of
# the step time (bench train's phase timers: direct cost, without the indirect cost of caches shared with the backbone).
# Usage: scripts/bench_overhead.sh [--shape A|B] [--rounds R] [--steps N] [--warmup W]
#                                  [--memory none,flat,engram,pagegram_s4]
#   presets: configs/a/<v>.yaml (200M-param tables), configs/b/<v>.yaml (10M); same step sizes as bench_vs_torch.sh.
# Needs a quiet machine (a sweep or a build beside it shifts every number); timings are reported, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
shape=B
rounds=5
steps=4
warmup=2
memories=none,flat,engram,pagegram_s4
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) shape="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --memory) memories="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_overhead: unknown option $1 (hint: --help)" >&2; exit 2 ;;
  esac
done
case "$shape" in
  A) dir=configs/a; sets=(--set train.tokens_per_step=4096 --set train.micro_batch=4) ;;
  B) dir=configs/b; sets=(--set train.tokens_per_step=8192 --set train.micro_batch=32) ;;
  *) echo "bench_overhead: unknown shape $shape (hint: A or B)" >&2; exit 2 ;;
esac
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_overhead: --rounds $rounds: need a positive integer" >&2; exit 2; }
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "bench_overhead: --steps $steps: need a positive integer" >&2; exit 2; }
[[ "$warmup" =~ ^[0-9]+$ ]] || { echo "bench_overhead: --warmup $warmup: need a non-negative integer" >&2; exit 2; }
IFS=, read -ra mem_list <<< "$memories"
for mem in "${mem_list[@]}"; do
  [ -f "$dir/$mem.yaml" ] || { echo "bench_overhead: no preset $dir/$mem.yaml (hint: --memory takes names of $dir)" >&2; exit 2; }
done
P=${PAGEGRAM:-build/pagegram}
[ -x "$P" ] || bash scripts/setup.sh >/dev/null
echo "shape $shape, $rounds interleaved rounds x ${#mem_list[@]} variants, $steps timed steps each; $($P --version)" >&2
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for mem in "${mem_list[@]}"; do
    out=$($P bench train --config "$dir/$mem.yaml" --synthetic --steps "$steps" --warmup "$warmup" "${sets[@]}" 2>&1) \
      || { echo "$out" >&2; exit 1; }
    toks=$(sed -n 's/^tok\/s \([0-9]*\) .*/\1/p' <<< "$out")
    rss=$(sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' <<< "$out")
    phase=$(sed -n 's/^memory \([0-9.]*\)% of step time.*/\1/p' <<< "$out")
    [ -n "$toks" ] || { echo "bench_overhead: no tok/s in the output of $mem: $out" >&2; exit 1; }
    echo "$mem $toks $rss $r ${phase:-0}" >> "$results"
    echo "round $r/$rounds $mem: $toks tok/s" >&2
  done
done
echo "| shape | memory | median tok/s | min – max | rounds | overhead of the median vs ${mem_list[0]} | per-round overhead, median (min – max) | memory work, % of step time (median) | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
base=""
for mem in "${mem_list[@]}"; do
  read -r med lo hi n rss < <(awk -v m="$mem" '$1 == m { print $2, $3 }' "$results" | sort -n | awk '
    { v[++n] = $1; if ($2 > r) r = $2 }
    END { med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; print med, v[1], v[n], n, r }')
  [ -n "$base" ] || base="$med"
  over=$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%+.1f%%", 100 * (1 - a / b) }')
  paired=$(awk -v m="$mem" -v f="${mem_list[0]}" '$1 == f { b[$4] = $2 } $1 == m { v[$4] = $2 }
    END { for (r in v) print 100 * (1 - v[r] / b[r]) }' "$results" | sort -g | awk '
    { o[++n] = $1 } END { med = (n % 2) ? o[(n + 1) / 2] : (o[n / 2] + o[n / 2 + 1]) / 2
      printf "%+.1f%% (%+.1f%% – %+.1f%%)", med, o[1], o[n] }')
  work=$(awk -v m="$mem" '$1 == m { print $5 }' "$results" | sort -g | awk '
    { o[++n] = $1 } END { med = (n % 2) ? o[(n + 1) / 2] : (o[n / 2] + o[n / 2 + 1]) / 2; printf "%.1f%%", med }')
  echo "| $shape | $mem | $med | $lo – $hi | $n | $over | $paired | $work | $rss |"
done
