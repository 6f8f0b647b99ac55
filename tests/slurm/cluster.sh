# The one-node Slurm cluster of the `slurm`-labelled tests, sourced by tests/slurm/slurm_integration.sh and
# tests/slurm/slurm_mpi.sh after they set PG_SLURM_NAME, SRC, PG, say() and fail(): installs slurm-wlm and munge
# when missing (as root), starts munged, slurmctld and slurmd with their own key, ports, state and logs under
# $WORK (a temp dir; kept and named when the test fails, or with PG_SLURM_KEEP=1), waits until the node is idle,
# and stops the daemons on exit.
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

WORK=$(mktemp -d "/tmp/pg_${PG_SLURM_NAME}.XXXXXX")
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
    echo "${PG_SLURM_NAME}: FAILED (exit $rc); everything is kept in $WORK" >&2
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
# A one-node cluster on this machine for tests/slurm/${PG_SLURM_NAME}.sh (no accounting, no cgroups).
ClusterName=pg${PG_SLURM_NAME//_/}
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
