#!/usr/bin/env bash
# Memory and cost of a memory table sharded by rows (train.table_sharding=rows, docs/mpi.md) against the replicated
# table, on this machine (a benchmark, not a test): `pagegram bench train --synthetic` as 1 process and as
# `mpirun -np 2` and `-np 4` (1 thread per rank), each way. Prints every rank's peak RSS, the bytes each rank sends
# per step (row fetches, gradients to their owners, dense gradients), the exchange's share of a step (rank 0) and
# tok/s; a run the memory check refuses (the ranks on this node would not fit) is shown with its one-line refusal.
# Then, on paper, the exchange per step and rank at 8 and 32 nodes (one rank per node) from the measured bytes.
# Usage: bench/bench_shard.sh [--params P] [--steps N] [--config C] [--set key=value ...]
#   default: configs/b/pagegram_s4.yaml with memory.target_params=1.5e9 (a 6 GB table: 4 replicas need more than
#   this 23 GiB machine has, 4 shards do not), 2 timed steps after 1 warm-up step. PAGEGRAM=<binary> measures that
#   build. Writes bench_shard.txt (and the raw outputs in bench_shard.d/) in the current directory.
set -euo pipefail
RESULT=$PWD/bench_shard.txt
RAW=$PWD/bench_shard.d
cd "$(dirname "$0")/.."
PG=$(realpath "${PAGEGRAM:-build/pagegram}")
PARAMS=1500000000
STEPS=2
CFG=configs/b/pagegram_s4.yaml
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --params) PARAMS=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --config) CFG=$2; shift ;;
    --set) SETS+=(--set "$2"); shift ;;
    *) echo "bench_shard: unknown option $1 (known: --params P --steps N --config C --set key=value)" >&2; exit 2 ;;
  esac
  shift
done
"$PG" --version | grep -q '^mpi: not built' && { echo "bench_shard: $PG is built without MPI" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "bench_shard: no mpirun (hint: apt-get install openmpi-bin)" >&2; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl=self,vader
rm -rf "$RAW"
mkdir -p "$RAW"

{
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(uname -sr); $("$PG" --version | head -n 1)"
  echo "load when starting: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "config: $CFG, memory.target_params=$PARAMS ${SETS[*]:-}, $STEPS timed steps, 1 thread per rank"
  echo
  echo "| ranks | table | status | peak RSS per rank (MiB) | sent per step per rank (MB) | messages per step | exchange share of a step | tok/s |"
  echo "|---:|---|---|---|---:|---:|---:|---:|"
} | tee "$RESULT"
for np in 1 2 4; do
  for sharding in replicated rows; do
    [ "$np" = 1 ] && [ "$sharding" = rows ] && continue  # one rank holds the whole table either way
    out=$RAW/np$np.$sharding.txt
    cmd=("$PG" bench train --config "$CFG" --synthetic --steps "$STEPS" --warmup 1 --set "memory.target_params=$PARAMS"
         --set train.threads=1 --set "train.table_sharding=$sharding" "${SETS[@]}")
    [ "$np" -gt 1 ] && cmd=(mpirun -np "$np" --oversubscribe "${cmd[@]}")
    echo "\$ ${cmd[*]}" >"$out"
    if "${cmd[@]}" >>"$out" 2>&1; then status=ran; else status=refused; fi
    /usr/bin/python3 - "$out" "$np" "$sharding" "$status" <<'PY' | tee -a "$RESULT"
import re, sys
path, np, sharding, status = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t = open(path).read()
def g(pat, default="–"):
    m = re.search(pat, t, re.M)
    return m.group(1) if m else default
if status == "refused":
    why = g(r"error: [^:]*: (this run needs about .*? GiB are available)", "failed: see " + path)
    print(f"| {np} | {sharding} | refused: {why} | – | – | – | – | – |")
else:
    rss = g(r"peak RSS per rank ([0-9 /]+) MiB", g(r"peak RSS ([0-9]+) MiB"))
    print(f"| {np} | {sharding} | ran | {rss.strip()} | {g(r'([0-9.]+) MB sent per step per rank', '0')} | "
          f"{g(r'in ([0-9.]+) messages', '0')} | {g(r'^exchange ([0-9.]+%)', '–')} | {g(r'^tok/s ([0-9]+)')} |")
PY
  done
done

# On paper: one rank per node, the same global batch. Per step and rank, the row fetches move (N-1)/N of the rows a
# rank's micro-batches read (they shrink as 1/N with the rank's share of the batch, and grow as (N-1)/N), the
# gradient lists about the same bytes, the dense gradients 2(N-1)/N of their size. Scaled from the 4-rank rows run.
/usr/bin/python3 - "$RAW" <<'PY' | tee -a "$RESULT"
import re, sys
raw = sys.argv[1]
def grab(name, pat):
    try:
        m = re.search(pat, open(f"{raw}/{name}").read(), re.M)
    except FileNotFoundError:
        return None
    return float(m.group(1)) if m else None
dense_mb = grab("np4.rows.txt", r"gradients \d+ dense floats \(([0-9.]+) MB\)")
sent4 = grab("np4.rows.txt", r"([0-9.]+) MB sent per step per rank")
if dense_mb is None or sent4 is None:
    print("\n(no 4-rank rows run to scale from)")
    sys.exit(0)
dense4 = 2 * 3 / 4 * dense_mb
table4 = max(sent4 - dense4, 0.0)  # fetches + gradient lists of the 4-rank run, per rank
print(f"\nEstimate (paper, not measured): 4 ranks sent {sent4:.1f} MB per step per rank, of which dense {dense4:.1f} MB "
      f"and table {table4:.1f} MB. One rank per node, same global batch:")
print("| nodes | dense MB | table MB | total MB per step per rank | at 10 GbE (1.25 GB/s) | at 100 Gb/s (12.5 GB/s) |")
print("|---:|---:|---:|---:|---:|---:|")
for n in (8, 32):
    dense = 2 * (n - 1) / n * dense_mb
    table = table4 * (4 / n) * ((n - 1) / n) / (3 / 4)
    tot = dense + table
    print(f"| {n} | {dense:.1f} | {table:.1f} | {tot:.1f} | {tot / 1250 * 1e3:.1f} ms | {tot / 12500 * 1e3:.1f} ms |")
PY
echo "(raw outputs: $RAW)"
