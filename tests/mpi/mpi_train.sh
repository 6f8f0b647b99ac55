#!/usr/bin/env bash
# Data-parallel training over real MPI (ctest `mpi_train`, in the default suite when CMake found MPI and mpirun):
# configs/tiny.yaml on the fixture corpus, 8 steps, for memory.layout none, flat, engram and pagegram, trained by
# one plain process and by `mpirun -np 2` and `-np 4` (--oversubscribe: 2 cores here); checkpoint.h5 and log.h5
# must be identical (tools/compare_runs.py: every dataset byte for byte; timing columns, thread and rank
# attributes aside); the same with the table sharded by rows (train.table_sharding=rows) for flat, engram and
# pagegram at 2 and 4 ranks. Then: a run stopped after 3 steps with 2 ranks and resumed with 1 (and one stopped with 1
# and resumed with 4) equals the unbroken run; 3 ranks are refused with one line; an error on one rank only
# (its corpus is missing) ends every rank instead of leaving the others waiting.
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
say "PASS: 1 process = 2 ranks = 4 ranks for none, flat, engram, pagegram, replicated and sharded by rows; eval with the table sharded; resume across rank counts; errors end every rank"
