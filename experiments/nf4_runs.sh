#!/usr/bin/env bash
# NF4 check of a sweep's finished runs (report: +0.0004 nats): for each run directory matching PATTERN, write its
# memory table as an NF4 .pgt file (`pagegram export`, every block read back and verified) and compare the held-out
# loss with the fp32 and the NF4 table on the same validation windows. Writes a Markdown table to OUT.
# Usage: experiments/nf4_runs.sh RUNS_DIR PATTERN OUT [WINDOWS]
#   e.g. experiments/nf4_runs.sh runs/table1 'pagegram_s4-s*' experiments/table1/nf4.md 2048
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: experiments/nf4_runs.sh RUNS_DIR PATTERN OUT [WINDOWS]" >&2; exit 2; }
runs_dir="$1"; pattern="$2"; out="$3"; windows="${4:-2048}"
P=${PAGEGRAM:-build/pagegram}
[ -x "$P" ] || { echo "nf4_runs: $P not built (hint: bash scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=()
start=$(date +%s)
shopt -s nullglob
dirs=("$runs_dir"/$pattern)
[ ${#dirs[@]} -gt 0 ] || { echo "nf4_runs: no run directory matches $runs_dir/$pattern" >&2; exit 2; }
for d in "${dirs[@]}"; do
  name=$(basename "$d")
  if ! "$P" sweep finished "$d" >/dev/null 2>&1; then
    echo "nf4_runs: skip $name (not finished)" >&2
    continue
  fi
  echo "nf4_runs: $name" >&2
  "$P" export --checkpoint "$d/checkpoint.h5" --out "$tmp/t.pgt" --eval-windows "$windows" > "$tmp/out.txt" 2>&1 ||
    { cat "$tmp/out.txt" >&2; exit 1; }
  line=$(grep 'held-out over' "$tmp/out.txt")
  fp32=$(sed -n 's/.*fp32 table \([0-9.]*\) nats.*/\1/p' <<< "$line")
  nf4=$(sed -n 's/.*NF4 table \([0-9.]*\) nats.*/\1/p' <<< "$line")
  diff=$(sed -n 's/.*difference \([-+0-9.]*\).*/\1/p' <<< "$line")
  bytes=$(stat -c %s "$tmp/t.pgt")
  rows+=("| ${name%-*} | $fp32 | $nf4 | $diff | $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') |")
  echo "$diff" >> "$tmp/diffs"
  rm -f "$tmp/t.pgt"
done
[ ${#rows[@]} -gt 0 ] || { echo "nf4_runs: no finished run under $runs_dir/$pattern" >&2; exit 1; }
mean=$(awk '{ s += $1; n++ } END { printf "%+.6f", s / n }' "$tmp/diffs")
max=$(awk '{ a = $1 < 0 ? -$1 : $1; if (a > m) m = a } END { printf "%.6f", m }' "$tmp/diffs")
{
  echo "# NF4 tables: held-out loss with the fp32 and the NF4 memory table"
  echo
  echo "Written by \`experiments/nf4_runs.sh $runs_dir '$pattern' $out $windows\` at $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "(commit $(git rev-parse --short=12 HEAD), on $(hostname), $(( $(date +%s) - start )) s). Each run's table written"
  echo "as an NF4 .pgt file (storage/FORMATS.md), read back with every block checksum verified, and evaluated on the"
  echo "first $windows fixed validation windows (the runs' own evaluation set)."
  echo
  echo "| run | fp32 table (nats) | NF4 table (nats) | NF4 − fp32 | .pgt MiB |"
  echo "|---|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Mean NF4 − fp32 over ${#rows[@]} runs: $mean nats (largest |difference| $max); report: +0.0004 nats."
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
