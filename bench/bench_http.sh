#!/usr/bin/env bash
# bench_http.sh: the HTTP server under N concurrent streaming clients, beside `bench generate` at N sessions on the
# same model and table source, in one run (docs/serving.md, "HTTP API").
#
#   bench/bench_http.sh --checkpoint runs/X/checkpoint.h5 [--source ram|mmap|direct:0|direct:1GiB] [--clients 64]
#                       [--max-tokens 64] [--prompt-tokens 64] [--threads N] [--drop-caches]
#                       [--synthetic-params 5e9]
#
# 1. `pagegram bench generate --sessions N` on the source (its table file kept in runs/bench_http and reused);
# 2. `pagegram serve --http` on the same file and source, then bench/bench_http.py with N clients;
# 3. the server's decode tok/s against bench generate's N-session aggregate.
# --drop-caches drops the page cache before each of the two (root; cold mmap). PAGEGRAM=<binary> measures that
# binary (default build/pagegram).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PAGEGRAM:-build/pagegram}
ckpt="" source=mmap clients=64 max_tokens=64 prompt_tokens=64 threads=0 drop=0 synthetic=()
while [ $# -gt 0 ]; do
  case "$1" in
    --checkpoint) ckpt=$2; shift 2 ;;
    --source) source=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --prompt-tokens) prompt_tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --drop-caches) drop=1; shift ;;
    --synthetic-params) synthetic=(--synthetic-params "$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench_http: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$ckpt" ] || { echo "bench_http: --checkpoint FILE is required" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_http: $bin not found (hint: bash scripts/setup.sh, or PAGEGRAM=<binary>)" >&2; exit 2; }
dir=runs/bench_http
mkdir -p "$dir"
drop_caches() {
  [ "$drop" -eq 1 ] || return 0
  sync
  if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "bench_http: cannot drop the page cache (not root?)" >&2; fi
}
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, Linux $(uname -r); $("$bin" --version | head -1)"
echo "== bench generate: $clients sessions, source $source"
drop_caches
"$bin" bench generate --checkpoint "$ckpt" --source "$source" --sessions "$clients" --prompt-tokens "$prompt_tokens" \
  --decode-tokens 8 --batch-steps "$max_tokens" --table-dir "$dir" --keep-tables --threads "$threads" "${synthetic[@]}" |
  tee "$dir/generate.txt"
gen=$(awk -F'|' '$2 ~ /[a-z]/ && $10+0 > 0 {v=$10} END {print v+0}' "$dir/generate.txt")  # decode tok/s, N sessions
args=(--checkpoint "$ckpt" --threads "$threads" --max-active "$clients")
table=$(sed -n 's/^table file \(written\|reused\): \([^ ]*\).*/\2/p' "$dir/generate.txt" | head -1)  # the file it served
case "$source" in
  ram) ;;
  mmap) args+=(--table "$table" --table-mode mmap) ;;
  direct:*) args+=(--table "$table" --table-mode direct --cache "${source#direct:}") ;;
  *) echo "bench_http: --source $source: expected ram, mmap or direct:<cache>" >&2; exit 2 ;;
esac
echo "== serve --http, $clients streaming clients"
drop_caches
log=$(mktemp)
"$bin" serve "${args[@]}" --http 0 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*on http://[^:]*:\([0-9]*\).*|\1|p' "$log")
  [ -n "$port" ] && break
  kill -0 $server 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "bench_http: the server did not start" >&2; cat "$log" >&2; exit 1; }
out=$(/usr/bin/python3 bench/bench_http.py --url "http://127.0.0.1:$port" --clients "$clients" \
  --max-tokens "$max_tokens" --prompt-tokens "$prompt_tokens")
echo "$out" | sed '$d'
echo "$out" | tail -1 | GEN=$gen N=$clients /usr/bin/python3 -c '
import json, os, sys
r = json.load(sys.stdin); g = float(os.environ["GEN"]); n = os.environ["N"]; d = r["server_decode_tok_s"]
print("== server decode %.1f tok/s vs bench generate %.1f tok/s at %s sessions: %.2fx; client aggregate %.1f tok/s"
      % (d, g, n, d / max(g, 1e-9), r["aggregate_tok_s"]))'
