#!/usr/bin/env bash
# Data-parallel training under Slurm (ctest label `slurm`, left out of the default suite like
# slurm_integration.sh: `ctest -L slurm`): a one-node cluster on this machine (munged, slurmctld, slurmd; the same
# set-up as tests/slurm/slurm_integration.sh), then `sbatch --wait -n 2` of a job whose step is
# `srun --mpi=pmix pagegram train` of configs/tiny.yaml (pagegram layout, fixture corpus): 2 MPI ranks wired by
# Slurm's PMIx plugin, as on a multi-node cluster (one task per node there). Its checkpoint.h5 and log.h5 must
# equal a 1-process run's bit for bit (tools/compare_runs.py). Then the same with `mpirun` inside an sbatch
# allocation of 2 tasks (Open MPI reads the allocation from Slurm), and with `srun` and the memory table sharded by
# rows over the 2 ranks (train.table_sharding=rows). The daemons are stopped on exit.
# Usage: tests/slurm/slurm_mpi.sh [PAGEGRAM_BINARY]   (default: build/pagegram of this checkout)
# PG_SLURM_KEEP=1 keeps the temp dir (it is always kept, and named, when the test fails).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
PG=${1:-$SRC/build/pagegram}
T0=$(date +%s)
say() { echo "[slurm_mpi $(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "slurm_mpi: FAIL: $*" >&2; exit 1; }

[ -x "$PG" ] || fail "no pagegram binary at $PG (hint: build first: bash scripts/setup.sh --werror)"
PG=$(realpath "$PG")
"$PG" --version | grep -q '^mpi: Open MPI' || fail "pagegram is not built with Open MPI: $("$PG" --version | grep mpi:)"
command -v mpirun >/dev/null || fail "no mpirun (hint: apt-get install openmpi-bin)"

# --- Slurm and munge -----------------------------------------------------------------------------------------
PG_SLURM_NAME=slurm_mpi
source "$SRC/tests/slurm/cluster.sh"
srun --mpi=list 2>&1 | grep -q pmix || fail "this Slurm has no PMIx plugin (srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' '))"

# --- the runs --------------------------------------------------------------------------------------------------
R=$WORK/runs
mkdir -p "$R"
chmod 755 "$R"
SETS=(--set "data.cache_dir=$WORK/cache" --set "data.corpus=$SRC/tests/fixtures/corpus" --set tokenizer.vocab_size=1024
      --set model.vocab=1024 --set tokenizer.input_sentence_size=4000 --set data.val_tokens=2048 --set train.steps=12
      --set train.eval_interval=6 --set train.eval_windows=16 --set train.checkpoint_interval=6
      --set train.log_interval=1 --set memory.target_params=100000 --set memory.layout=pagegram)
CFG=$SRC/configs/tiny.yaml
"$PG" data tokenize --config "$CFG" "${SETS[@]}" >"$WORK/tokenize.log" 2>&1 || { cat "$WORK/tokenize.log"; fail "tokenize"; }
say "reference: one process"
"$PG" train --config "$CFG" "${SETS[@]}" --set "train.out_dir=$R/single" >"$WORK/single.out" 2>&1 ||
  { tail "$WORK/single.out"; fail "the 1-process run failed"; }

printf -v ARGS '%q ' "$PG" train --config "$CFG" "${SETS[@]}"
cat >"$WORK/srun_job.sh" <<JOB
#!/usr/bin/env bash
#SBATCH --job-name=pg_srun_mpi
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --output=$WORK/srun_job.out
set -e
echo "allocation: \$SLURM_NTASKS tasks on \$SLURM_JOB_NODELIST"
srun --mpi=pmix --ntasks=2 --cpus-per-task=1 $ARGS --set train.out_dir=$R/srun2
JOB
cat >"$WORK/mpirun_job.sh" <<JOB
#!/usr/bin/env bash
#SBATCH --job-name=pg_mpirun
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --output=$WORK/mpirun_job.out
set -e
echo "allocation: \$SLURM_NTASKS tasks on \$SLURM_JOB_NODELIST"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np \$SLURM_NTASKS $ARGS --set train.out_dir=$R/mpirun2
JOB

cat >"$WORK/srunrows_job.sh" <<JOB
#!/usr/bin/env bash
#SBATCH --job-name=pg_srun_rows
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:10:00
#SBATCH --output=$WORK/srunrows_job.out
set -e
echo "allocation: \$SLURM_NTASKS tasks on \$SLURM_JOB_NODELIST"
srun --mpi=pmix --ntasks=2 --cpus-per-task=1 $ARGS --set train.table_sharding=rows --set train.out_dir=$R/srunrows2
JOB

compare() {  # NAME
  local out
  out=$(/usr/bin/python3 "$SRC/tools/compare_runs.py" "$R/single" "$R/$1" 2>&1) || { echo "$out"; fail "$1 differs from the 1-process run"; }
  say "single = $1: $(echo "$out" | tr '\n' ' ')"
}
for job in srun mpirun srunrows; do
  say "sbatch --wait -n 2: $job"
  if ! timeout 600 sbatch --wait "$WORK/${job}_job.sh" >"$WORK/${job}_sbatch.out" 2>&1; then
    cat "$WORK/${job}_sbatch.out" "$WORK/${job}_job.out" 2>/dev/null | tail -n 30
    fail "the $job job failed"
  fi
  grep -q '2 ranks x 2 micro-batches' "$WORK/${job}_job.out" || { tail -n 30 "$WORK/${job}_job.out"; fail "$job: not 2 ranks"; }
  sed -n '/^train tiny/p;/^ranks /p;/^throughput/p' "$WORK/${job}_job.out" | sed 's/^/    /'
  compare "${job}2"
done
say "PASS: srun --mpi=pmix (replicated and with the table sharded by rows) and mpirun in an sbatch allocation of 2 tasks = 1 process, bit for bit"
