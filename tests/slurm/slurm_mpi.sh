#!/usr/bin/env bash
# Data-parallel training under Slurm (ctest label `slurm`, left out of the default suite like
# slurm_integration.sh: `ctest -L slurm`): a one-node cluster on this machine (munged, slurmctld, slurmd; the same
# set-up as tests/slurm/slurm_integration.sh), then `sbatch --wait -n 2` of a job whose step is
# `srun --mpi=pmix pagegram train` of configs/tiny.yaml (pagegram layout, fixture corpus): 2 MPI ranks wired by
# Slurm's PMIx plugin, as on a multi-node cluster (one task per node there). Its checkpoint.h5 and log.h5 must
# equal a 1-process run's bit for bit (scripts/compare_runs.py). Then the same with `mpirun` inside an sbatch
# allocation of 2 tasks (Open MPI reads the allocation from Slurm). The daemons are stopped on exit.
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
missing=()
for c in sbatch squeue sinfo scancel scontrol slurmctld slurmd; do command -v "$c" >/dev/null || missing+=(slurm-wlm); done
for c in munged mungekey; do command -v "$c" >/dev/null || missing+=(munge); done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || fail "slurm-wlm / munge are not installed and this is not root (hint: sudo apt-get install slurm-wlm munge)"
  say "installing slurm-wlm munge"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null ||
    fail "apt-get install slurm-wlm munge failed (hint: apt-get update first)"
fi
command -v flock >/dev/null || fail "flock (util-linux) is missing: the job script needs it"
[ "$(id -u)" -eq 0 ] || fail "the private cluster runs its daemons and jobs as root: run this test as root"

WORK=$(mktemp -d /tmp/pg_slurm_mpi.XXXXXX)
chmod 755 "$WORK"
S=$WORK/slurm
mkdir -p "$S/state" "$S/spool" "$S/log" "$S/munge-key" "$S/munge-run"
chmod 700 "$S/munge-key"
chmod 755 "$S/munge-run"
DAEMONS=()  # pids of the daemons this script started (stopped by pid on exit)

cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && [ ${#DAEMONS[@]} -gt 0 ]; then
    scancel --user="$(id -un)" 2>/dev/null  # this private cluster's jobs only (SLURM_CONF is ours)
    sleep 1
  fi
  for pid in "${DAEMONS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${DAEMONS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null
  done
  if [ $rc -ne 0 ]; then
    for f in "$S"/log/*.log; do
      [ -f "$f" ] && { echo "--- last lines of $f"; tail -n 15 "$f"; }
    done
    echo "slurm_mpi: FAILED (exit $rc); everything is kept in $WORK" >&2
  elif [ "${PG_SLURM_KEEP:-0}" = 1 ]; then
    say "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free TCP ports (nothing answers on them now).
free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 30000))
    [ "$p" != "${1:-}" ] || continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  fail "no free TCP port found for slurmctld / slurmd"
}
CTL_PORT=$(free_port)
D_PORT=$(free_port "$CTL_PORT")
NODE=$(hostname -s)
# The node's real topology (slurmd -C), so slurmd registers without a mismatch.
TOPO=$(slurmd -C 2>/dev/null | head -n 1 | sed -n 's/^NodeName=[^ ]* \(.*\)$/\1/p')
TOPO=${TOPO:-CPUs=$(nproc)}
TOPO=$(echo "$TOPO" | sed 's/RealMemory=[0-9]*/RealMemory=1000/')

mungekey --create --keyfile="$S/munge-key/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$S/munge-key/munge.key" bs=1024 count=1 status=none
chmod 600 "$S/munge-key/munge.key"
MUNGE_SOCKET=$S/munge-run/munge.socket
munged --foreground --force --key-file="$S/munge-key/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$S/munge-run/munged.pid" --seed-file="$S/munge-key/munged.seed" --log-file="$S/log/munged.log" \
  >"$S/log/munged.out" 2>&1 &
DAEMONS+=($!)

cat >"$S/slurm.conf" <<EOF
# A one-node cluster on this machine for tests/slurm/slurm_mpi.sh (no accounting, no cgroups).
ClusterName=pgmpi
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTL_PORT
SlurmdPort=$D_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=10
NodeName=$NODE NodeAddr=127.0.0.1 $TOPO State=UNKNOWN
PartitionName=pgtest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$S/slurm.conf

for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
[ -S "$MUNGE_SOCKET" ] || fail "Slurm could not start: munged did not start (see $S/log/munged.out: $(tail -n 3 "$S/log/munged.out" | tr '\n' ' '))"
slurmctld -D -i -f "$SLURM_CONF" >"$S/log/slurmctld.out" 2>&1 &
DAEMONS+=($!)
CTLD=$!
slurmd -D -N "$NODE" -f "$SLURM_CONF" >"$S/log/slurmd.out" 2>&1 &
DAEMONS+=($!)
SLURMD=$!
say "slurm $(sinfo --version 2>/dev/null | cut -d' ' -f2): node $NODE ($TOPO), ports $CTL_PORT/$D_PORT, in $S"
state=""
for _ in $(seq 120); do
  kill -0 "$CTLD" 2>/dev/null || fail "Slurm could not start: slurmctld exited: $(grep -h -E 'fatal|error' "$S/log/slurmctld.out" | tail -n 3 | tr '\n' ' ')"
  kill -0 "$SLURMD" 2>/dev/null || fail "Slurm could not start: slurmd exited: $(grep -h -E 'fatal|error' "$S/log/slurmd.out" | tail -n 3 | tr '\n' ' ')"
  state=$(sinfo -h -N -n "$NODE" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "Slurm could not start: node $NODE is '${state:-unknown}' after 60 s (see $S/log)"
say "sinfo: $(sinfo -h -o '%P %a %D %t %N')"
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

compare() {  # NAME
  local out
  out=$(/usr/bin/python3 "$SRC/scripts/compare_runs.py" "$R/single" "$R/$1" 2>&1) || { echo "$out"; fail "$1 differs from the 1-process run"; }
  say "single = $1: $(echo "$out" | tr '\n' ' ')"
}
for job in srun mpirun; do
  say "sbatch --wait -n 2: $job"
  if ! timeout 600 sbatch --wait "$WORK/${job}_job.sh" >"$WORK/${job}_sbatch.out" 2>&1; then
    cat "$WORK/${job}_sbatch.out" "$WORK/${job}_job.out" 2>/dev/null | tail -n 30
    fail "the $job job failed"
  fi
  grep -q '2 ranks x 2 micro-batches' "$WORK/${job}_job.out" || { tail -n 30 "$WORK/${job}_job.out"; fail "$job: not 2 ranks"; }
  sed -n '/^train tiny/p;/^ranks /p;/^throughput/p' "$WORK/${job}_job.out" | sed 's/^/    /'
  compare "${job}2"
done
say "PASS: srun --mpi=pmix and mpirun in an sbatch allocation of 2 tasks = 1 process, bit for bit"
