#!/usr/bin/env bash
# Data-parallel training over real MPI (ctest `mpi_train`, in the default suite when CMake found MPI and mpirun):
# configs/tiny.yaml on the fixture corpus, 8 steps, for memory.layout none, flat, engram and pagegram, trained by
# one plain process and by `mpirun -np 2` and `-np 4` (--oversubscribe: 2 cores here); checkpoint.h5 and log.h5
# must be identical (tools/compare_runs.py: every dataset byte for byte; timing columns, thread and rank
# attributes aside); the same with the table sharded by rows (train.table_sharding=rows) for flat, engram and
# pagegram at 2 and 4 ranks. Then: a run stopped after 3 steps with 2 ranks and resumed with 1 (and one stopped with 1
# and resumed with 4) equals the unbroken run; 3 ranks are refused with one line; an error on one rank only
# (its corpus is missing) ends every rank instead of leaving the others waiting. A run sharded by rows, SIGKILLed at
# random instants and resumed until it finishes, ends with the unbroken run's bits; a run directory the ranks do
# not share is refused at the first save.
# Usage: tests/mpi/mpi_train.sh [PAGEGRAM_BINARY] [MPIRUN]
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
PG=$(realpath "${1:-$SRC/build/pagegram}")
MPIRUN=${2:-mpirun}
T0=$(date +%s)
say() { echo "[mpi_train $(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "mpi_train: FAIL: $*" >&2; exit 1; }

"$PG" --version | grep -q '^mpi: Open MPI\|^mpi: MPI' || fail "this pagegram is not built with MPI: $("$PG" --version | grep mpi:)"
command -v "$MPIRUN" >/dev/null || fail "no $MPIRUN (hint: apt-get install openmpi-bin)"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# Shared-memory and self transports only (one node); no warnings about missing network interfaces.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

WORK=$(mktemp -d /tmp/pg_mpi.XXXXXX)
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "mpi_train: everything is kept in $WORK" >&2; else rm -rf "$WORK"; fi' EXIT

SETS=(--set "data.cache_dir=$WORK/cache" --set "data.corpus=$SRC/tests/fixtures/corpus" --set tokenizer.vocab_size=1024
      --set model.vocab=1024 --set tokenizer.input_sentence_size=4000 --set data.val_tokens=2048 --set train.steps=8
      --set train.eval_interval=4 --set train.eval_windows=16 --set train.checkpoint_interval=4
      --set train.log_interval=1 --set memory.target_params=100000)
CFG=$SRC/configs/tiny.yaml  # 4 micro-batches of 8 x 32 tokens per step
"$PG" data tokenize --config "$CFG" "${SETS[@]}" >"$WORK/tokenize.log" 2>&1 || { cat "$WORK/tokenize.log"; fail "tokenize"; }

train() {  # NAME RANKS [extra args...]: one plain process for RANKS=1, else mpirun -np RANKS
  local name=$1 np=$2
  shift 2
  local cmd=("$PG" train --config "$CFG" "${SETS[@]}" --set "train.out_dir=$WORK/$name" "$@")
  if [ "$np" = 1 ]; then
    timeout 300 "${cmd[@]}" >"$WORK/$name.out" 2>&1 || { tail -n 20 "$WORK/$name.out"; fail "$name: exit $?"; }
  else
    timeout 300 "$MPIRUN" -np "$np" --oversubscribe "${cmd[@]}" >"$WORK/$name.out" 2>&1 ||
      { tail -n 20 "$WORK/$name.out"; fail "$name (mpirun -np $np): exit $?"; }
  fi
}
same() {  # A B: bit-identical checkpoint and log
  local out
  out=$(/usr/bin/python3 "$SRC/tools/compare_runs.py" "$WORK/$1" "$WORK/$2" 2>&1) || { echo "$out"; fail "$1 and $2 differ"; }
  say "$1 = $2: $(echo "$out" | tr '\n' ' ')"
}

for layout in none flat engram pagegram; do
  train "$layout-1" 1 --set "memory.layout=$layout"
  for np in 2 4; do
    train "$layout-$np" "$np" --set "memory.layout=$layout"
    same "$layout-1" "$layout-$np"
  done
done
grep -q '2 ranks x 2 micro-batches' "$WORK/pagegram-2.out" || fail "no rank line in the progress of pagegram-2"
[ "$(grep -c '^step 8/8' "$WORK/pagegram-4.out")" = 1 ] || fail "the progress line should come from rank 0 only"
[ "$(grep -c '^run ' "$WORK/pagegram-4.out")" = 1 ] || fail "the summary should come from rank 0 only"
[ "$(grep -c '\[data\] dataset:' "$WORK/pagegram-4.out")" = 1 ] || fail "the dataset line should come from rank 0 only"

say "tables sharded by rows (train.table_sharding=rows): the same bits as one process"
for layout in flat engram pagegram; do
  for np in 2 4; do
    train "$layout-rows$np" "$np" --set "memory.layout=$layout" --set train.table_sharding=rows
    same "$layout-1" "$layout-rows$np"
  done
done

say "eval with the table sharded over 2 and 4 ranks = one process"
one=$(timeout 120 "$PG" eval --checkpoint "$WORK/engram-1/checkpoint.h5" 2>/dev/null | grep '^held-out' | sed 's/ (.*//')
[ -n "$one" ] || fail "eval printed no held-out line"
for np in 2 4; do
  timeout 120 "$MPIRUN" -np "$np" --oversubscribe "$PG" eval --checkpoint "$WORK/engram-1/checkpoint.h5" \
    >"$WORK/eval$np.out" 2>&1 || { tail -n 20 "$WORK/eval$np.out"; fail "eval under mpirun -np $np"; }
  many=$(grep '^held-out' "$WORK/eval$np.out" | sed 's/ (.*//')
  [ "$many" = "$one" ] || fail "eval over $np ranks: '$many', one process: '$one'"
  [ "$(grep -c "^ranks       $np, table sharded by rows" "$WORK/eval$np.out")" = 1 ] || fail "eval -np $np: no single ranks line"
done
say "  $one (1, 2 and 4 ranks)"

say "export of a table checkpointed by 4 owners = export of one process's table; its model folder stands alone"
for run in engram-1 engram-rows4; do
  timeout 120 "$PG" export --checkpoint "$WORK/$run/checkpoint.h5" --out "$WORK/$run.pgt" >"$WORK/$run.export.out" 2>&1 ||
    { cat "$WORK/$run.export.out"; fail "export $run"; }
done
# The same data blocks and table_xxh64 (the header's info names the source checkpoint, which differs).
/usr/bin/python3 -c '
import re, struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
h = struct.unpack_from("<Q", a, 16)[0]
xa, xb = (re.search(rb"info.table_xxh64=(\w+)", x).group(1) for x in (a, b))
sys.exit(0 if h == struct.unpack_from("<Q", b, 16)[0] and a[4096 * h:] == b[4096 * h:] and xa == xb else 1)' \
  "$WORK/engram-1.pgt" "$WORK/engram-rows4.pgt" || fail "the .pgt of the sharded checkpoint differs from one process's"
timeout 120 "$PG" export --checkpoint "$WORK/engram-rows4/checkpoint.h5" --model-dir "$WORK/model4" \
  >"$WORK/model4.out" 2>&1 || { cat "$WORK/model4.out"; fail "export --model-dir of the sharded checkpoint"; }
mv "$WORK/model4" "$WORK/model4-moved"  # read from elsewhere, the run directory gone
mv "$WORK/engram-rows4" "$WORK/engram-rows4-gone"
gen() { timeout 120 "$PG" generate "$@" --prompt "the" --max-tokens 8 --temperature 0 --ids 2>/dev/null | grep -i 'ids'; }
g1=$(gen --checkpoint "$WORK/engram-1/checkpoint.h5" --table "$WORK/engram-1.pgt")
g4=$(gen --model "$WORK/model4-moved")
[ -n "$g1" ] && [ "$g1" = "$g4" ] || fail "generate from the moved model folder: '$g4', from one process's: '$g1'"
say "  the same .pgt data blocks and table_xxh64; generate --model (moved): $g4"
mv "$WORK/engram-rows4-gone" "$WORK/engram-rows4"

say "resume with another rank count"
# (Collision reading (b) counts owners from the step a process started at: off here, as docs/robustness.md "Kill at any instant" says.)
NO_OWNERS=(--set memory.collision_owners=false)
train pagegram-unbroken 1 --set memory.layout=pagegram "${NO_OWNERS[@]}"
train resume21 2 --set memory.layout=pagegram "${NO_OWNERS[@]}" --stop-after 3
train resume21 1 --set memory.layout=pagegram "${NO_OWNERS[@]}" --resume
grep -q 'resuming at step 3' "$WORK/resume21.out" || fail "resume21 did not resume at step 3"
same pagegram-unbroken resume21
train engram-unbroken 1 --set memory.layout=engram "${NO_OWNERS[@]}"
train resume14 1 --set memory.layout=engram "${NO_OWNERS[@]}" --stop-after 5
train resume14 4 --set memory.layout=engram "${NO_OWNERS[@]}" --resume
same engram-unbroken resume14
train rows24 2 --set memory.layout=engram "${NO_OWNERS[@]}" --set train.table_sharding=rows --stop-after 5
train rows24 4 --set memory.layout=engram "${NO_OWNERS[@]}" --set train.table_sharding=rows --resume
same engram-unbroken rows24

say "SIGKILL at random instants (table sharded by rows, a checkpoint every step), then --resume: the unbroken run"
# Every process of the run (mpirun and its ranks) is killed at once, as a node failure would; round 1 as soon as the
# first checkpoint exists, later rounds after a random delay. Kills land mid-step, mid-shard, mid-checkpoint and
# between the ranks' shard writes and rank 0's checkpoint (counted, not asserted: the instants are random); the run
# must end with the unbroken run's bits and only its last save's shards.
KSETS=(--set memory.layout=engram "${NO_OWNERS[@]}" --set train.steps=48 --set train.eval_interval=16
       --set train.checkpoint_interval=1)
train kill-unbroken 1 "${KSETS[@]}"
KDIR=$WORK/killed
kills=0 between=0
for round in $(seq 1 60); do
  resume=()
  if [ -e "$KDIR/checkpoint.h5" ]; then resume=(--resume); else rm -f "$KDIR/log.h5"; fi  # as scripts/main.sh does
  # In a subshell (not exec'ed: it exits with mpirun's status), whose "Killed" notice goes to the round's output.
  ( "$MPIRUN" -np 2 --oversubscribe "$PG" train --config "$CFG" "${SETS[@]}" "${KSETS[@]}" \
      --set train.table_sharding=rows --set "train.out_dir=$KDIR" "${resume[@]}"
    exit $? ) >"$KDIR.$round.out" 2>&1 &
  pid=$!
  if [ "$round" = 1 ]; then
    for _ in $(seq 1 600); do [ -e "$KDIR/checkpoint.h5" ] || ! kill -0 $pid 2>/dev/null && break; sleep 0.01; done
  else
    # 0.2-1.1 s, growing by 0.05 s a round so a slow machine (a start-up near a second) still finishes the run
    sleep "$(awk -v r="$RANDOM" -v k="$round" 'BEGIN { print 0.2 + (r % 90) / 100 + 0.05 * k }')"
  fi
  if kill -0 $pid 2>/dev/null; then
    pkill -9 -f -- "train.out_dir=$KDIR" || true
    kills=$((kills + 1))
  fi
  set +e
  { wait $pid; } 2>/dev/null
  rc=$?
  set -e
  if [ $rc = 0 ]; then break; fi
  # Shard files of a step after the checkpoint's: this kill landed between the shard writes and the checkpoint.
  ahead=$(/usr/bin/python3 -c '
import glob, h5py, os, re, sys
d = sys.argv[1]
step = h5py.File(d + "/checkpoint.h5", "r").attrs["step"] if os.path.exists(d + "/checkpoint.h5") else 0
print(sum(int(re.search(r"table-(\d+)-", f).group(1)) > step for f in glob.glob(d + "/checkpoint.table-*.h5")))' "$KDIR")
  [ "$ahead" = 0 ] || between=$((between + 1))
  pgrep -f -- "train.out_dir=$KDIR" >/dev/null && { sleep 1; pkill -9 -f -- "train.out_dir=$KDIR" || true; }
  [ $rc -ge 128 ] || grep -q 'ORTE has lost communication\|killed\|Killed\|exited on signal' "$KDIR.$round.out" ||
    { tail -n 20 "$KDIR.$round.out"; fail "killed run, round $round: exit $rc, not a kill"; }
done
[ $rc = 0 ] || { tail -n 20 "$KDIR.$round.out"; fail "the killed run did not finish in 60 rounds"; }
[ $kills -ge 1 ] || fail "the run was never killed"
same kill-unbroken killed
shards=$(cd "$KDIR" && ls checkpoint.table-* | tr '\n' ' ')
echo "$shards" | grep -Eq '^checkpoint\.table-48-([0-9a-f]{12})-0of2\.h5 checkpoint\.table-48-\1-1of2\.h5 $' ||
  fail "shard files left: $shards (expected the last save's two)"
say "  $kills kills in $round rounds ($between between the shard writes and the checkpoint); left: $shards"

say "3 ranks: refused with one line"
set +e
timeout 120 "$MPIRUN" -np 3 --oversubscribe "$PG" train --config "$CFG" "${SETS[@]}" --set "train.out_dir=$WORK/three" \
  >"$WORK/three.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "mpirun -np 3: exit $rc (expected an error, not success or a hang)"
# (The ranks share the pipe: another rank's output may stand before the line on the same line.)
grep -q 'error: 3 data-parallel ranks cannot split a step of 4 micro-batches.*hint.*\[rank 0 of 3; ending every rank\]$' "$WORK/three.out" ||
  { cat "$WORK/three.out"; fail "mpirun -np 3: no one-line error with a hint"; }
say "  exit $rc: $(grep -o 'error: 3 data-parallel.*' "$WORK/three.out" | head -n 1)"

say "an error on rank 1 only ends rank 0 too"
set +e
timeout 120 "$MPIRUN" --oversubscribe \
  -np 1 "$PG" train --config "$CFG" "${SETS[@]}" --set "train.out_dir=$WORK/onebad" : \
  -np 1 "$PG" train --config "$CFG" "${SETS[@]}" --set "train.out_dir=$WORK/onebad" --set "data.corpus=$WORK/nowhere" \
  --set "data.cache_dir=$WORK/nocache" >"$WORK/onebad.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "one bad rank: exit $rc (expected an error, not success or a hang)"
grep -q 'error: .*\[rank 1 of 2; ending every rank\]$' "$WORK/onebad.out" || { cat "$WORK/onebad.out"; fail "no error line from rank 1"; }
say "  exit $rc: $(grep -o 'error: .*' "$WORK/onebad.out" | head -n 1)"
say "a run directory the ranks do not share (table sharded by rows): refused at the first save with one line"
mkdir -p "$WORK/wd0" "$WORK/wd1"
UNSHARED=(train --config "$CFG" "${SETS[@]}" --set memory.layout=engram --set train.table_sharding=rows
          --set train.out_dir=run)  # relative: another folder for each rank
set +e
timeout 120 "$MPIRUN" --oversubscribe -np 1 --wdir "$WORK/wd0" "$PG" "${UNSHARED[@]}" : \
  -np 1 --wdir "$WORK/wd1" "$PG" "${UNSHARED[@]}" >"$WORK/unshared.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "unshared run directory: exit $rc (expected an error, not success or a hang)"
grep -q 'error: .*table shard 1 of 2 .*which is missing (hint: .*\[rank 0 of 2; ending every rank\]$' "$WORK/unshared.out" ||
  { cat "$WORK/unshared.out"; fail "unshared run directory: no one-line error from rank 0"; }
[ ! -e "$WORK/wd0/run/checkpoint.h5" ] || fail "unshared run directory: a checkpoint was written"
say "  exit $rc: $(grep -o 'error: .*' "$WORK/unshared.out" | head -n 1 | cut -c1-160)..."
say "PASS: 1 process = 2 ranks = 4 ranks for none, flat, engram, pagegram, replicated and sharded by rows; eval with the table sharded; resume across rank counts; kills at random instants of a sharded run; errors end every rank"
