#!/usr/bin/env bash
# Scaling of data-parallel training on this machine (a benchmark, not a test): for each config, steady-state
# `pagegram bench train --synthetic` as 1 process x 2 threads, 1 process x 1 thread, and `mpirun -np 2` x 1 thread
# per rank; the exchange's share of step time (measured on rank 0: time inside the tree exchanges, waiting for
# the partner included) and the bytes each rank sends per step. Then, on paper, the efficiency at 8 and 32
# nodes on 10 GbE and 100 Gb/s from the measured numbers (model printed with the table).
# Usage: bench/bench_mpi.sh [--steps N] [--set key=value ...] [CONFIG ...]
#   default configs: configs/shape_b.yaml configs/b/pagegram_s4.yaml; 4 timed steps (+1 warm-up) per run. --set applies
#   to every run (e.g. shape A with a smaller global batch: --steps 1 --set train.tokens_per_step=16384); the paper
#   estimate always uses the config's own train.tokens_per_step. Writes bench_mpi.txt (and the raw outputs in
#   bench_mpi.d/) in the current directory.
set -euo pipefail
RESULT=$PWD/bench_mpi.txt
RAW=$PWD/bench_mpi.d
cd "$(dirname "$0")/.."
PG=$(realpath "${PAGEGRAM:-build/pagegram}")
STEPS=4
CONFIGS=()
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift ;;
    --set) SETS+=(--set "$2"); shift ;;
    *) CONFIGS+=("$1") ;;
  esac
  shift
done
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(configs/shape_b.yaml configs/b/pagegram_s4.yaml)
"$PG" --version | grep -q '^mpi: ' || { echo "bench_mpi: $PG has no mpi line in --version" >&2; exit 2; }
"$PG" --version | grep -q '^mpi: not built' && { echo "bench_mpi: $PG is built without MPI" >&2; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl=self,vader
OUT=$RAW
rm -rf "$OUT"
mkdir -p "$OUT"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(uname -sr); $("$PG" --version | tail -n 2 | tr '\n' ' ')"
echo "load when starting: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share this machine)"
for cfg in "${CONFIGS[@]}"; do
  steps=$STEPS
  name=$(basename "$cfg" .yaml)
  "$PG" config show "$cfg" | sed -n 's/^  tokens_per_step: *//p' | head -n 1 >"$OUT/$name.tokens_per_step"
  for mode in p1t2 p1t1 r2t1; do
    args=(bench train --config "$cfg" --synthetic --steps "$steps" --warmup 1 "${SETS[@]}")
    case $mode in
      p1t2) cmd=("$PG" "${args[@]}" --set train.threads=2) ;;
      p1t1) cmd=("$PG" "${args[@]}" --set train.threads=1) ;;
      r2t1) cmd=(mpirun -np 2 --bind-to core "$PG" "${args[@]}" --set train.threads=1) ;;
    esac
    echo "\$ ${cmd[*]}" >"$OUT/$name.$mode.txt"
    "${cmd[@]}" >>"$OUT/$name.$mode.txt" 2>"$OUT/$name.$mode.err" || { cat "$OUT/$name.$mode.err" >&2; exit 1; }
    echo "== $name $mode"; grep -E '^\$|^tok/s|^gradients|^exchange|^bench train' "$OUT/$name.$mode.txt"
  done
done | tee "$RESULT"

/usr/bin/python3 - "$OUT" "${CONFIGS[@]}" <<'PY' | tee -a "$RESULT"
import os, re, sys
out, cfgs = sys.argv[1], sys.argv[2:]
def grab(path, pat, cast=float, default=None):
    m = re.search(pat, open(path).read(), re.M)
    return cast(m.group(1)) if m else default
print()
print("| config | 1 proc x 2 thr tok/s | 1 proc x 1 thr tok/s | 2 ranks x 1 thr tok/s | 2 ranks / 1x2 | exchange share | MB sent / step / rank | dense grad MB | touched rows x width |")
print("|---|---|---|---|---|---|---|---|---|")
rows = {}
for cfg in cfgs:
    n = os.path.basename(cfg)[:-5]
    f = {m: os.path.join(out, f"{n}.{m}.txt") for m in ("p1t2", "p1t1", "r2t1")}
    t = {m: grab(p, r"^tok/s (\d+)", float) for m, p in f.items()}
    share = grab(f["r2t1"], r"^exchange ([\d.]+)% ", float, 0.0)
    mb = grab(f["r2t1"], r"([\d.]+) MB sent per step", float, 0.0)
    dense = grab(f["p1t2"], r"^gradients (\d+) dense floats", int)
    touched = grab(f["p1t2"], r"(\d+) table rows x", int, 0)
    width = grab(f["p1t2"], r"table rows x (\d+) touched", int, 0)
    tps = int(open(os.path.join(out, f"{n}.tokens_per_step")).read().split()[0])  # the config's own global batch
    local = grab(f["r2t1"], r"per step: ([\d.]+) ms transfer", float, 0.0) / 1e3  # one tree level here (shared memory)
    rows[n] = dict(t=t, dense=dense, touched=touched, width=width, tps=tps, local=local)
    print(f"| {n} | {t['p1t2']:.0f} | {t['p1t1']:.0f} | {t['r2t1']:.0f} | {t['r2t1'] / t['p1t2']:.2f} | {share:.1f}% | "
          f"{mb:.2f} | {4e-6 * dense:.1f} | {touched} x {width} |")

# Paper estimate. A node = this machine's measured rate (1 process x 2 threads). Strong scaling: the global batch
# (tokens_per_step) fixed, each of R nodes computes 1/R of it (accum must be a multiple of R: micro_batch lowered
# where needed; per-token compute assumed unchanged). No overlap of exchange and compute (the tree exchange runs
# after the local micro-batches). Dense: recursive halving + doubling, 2 (R-1)/R x D bytes per rank and
# 2 log2(R) messages; sparse rows: recursive doubling, log2(R) messages, the list at level k at most
# min(U, 2^k U / R) rows of (8 + 4 w) bytes (U = rows touched by the whole step); alpha = latency per message.
import math
nets = [("10 GbE", 10e9 / 8, 30e-6), ("100 Gb/s", 100e9 / 8, 3e-6)]
print()
print("Paper estimate (model above; a node = this 2-vCPU machine's best single-process rate; bandwidth = the link's nominal")
print("rate, latency 30 us per message on 10 GbE TCP, 3 us on 100 Gb/s RDMA; a range = optimistic .. pessimistic: table rows")
print("not shared .. all shared between ranks, and no CPU cost .. log2(R) x the CPU time of one level measured here):")
print("| config | nodes | compute s/step | network | exchange s/step | efficiency |")
print("|---|---|---|---|---|---|")
for n, r in rows.items():
    t1 = r["tps"] / max(r["t"]["p1t2"], r["t"]["p1t1"])  # a node: the best single-process rate measured here
    D = 4 * r["dense"]
    rowb = 8 + 4 * r["width"]
    for R in (8, 32):
        tc = t1 / R
        L = int(math.log2(R))
        # Sparse list at level k: between 2^k U / R rows (no row shared between ranks' blocks) and U (all shared).
        lo_rows = sum(min(r["touched"], (2 ** k) * r["touched"] / R) for k in range(L))
        hi_rows = L * r["touched"]
        for net, bw, alpha in nets:
            dense = 2 * (R - 1) / R * D / bw + 2 * L * alpha
            tx_lo = dense + lo_rows * rowb / bw + 2 * L * alpha * (r["touched"] > 0)
            # Pessimistic: every row shared, and each level also costs the CPU time one level took here (copies,
            # additions, sparse merges, measured at 2 ranks on this loaded machine).
            tx_hi = dense + hi_rows * rowb / bw + 2 * L * alpha * (r["touched"] > 0) + L * r["local"]
            eff = lambda tx: tc / (tc + tx)
            rng = f"{tx_lo:.3f}" if tx_hi == tx_lo else f"{tx_lo:.3f}-{tx_hi:.3f}"
            erng = f"{eff(tx_lo):.0%}" if tx_hi == tx_lo else f"{eff(tx_hi):.0%}-{eff(tx_lo):.0%}"
            print(f"| {n} | {R} | {tc:.3f} | {net} | {rng} | {erng} |")
PY
echo "(written to $RESULT)"
