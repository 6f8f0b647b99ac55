#!/usr/bin/env bash
# Integration test of `pagegram sweep slurm` on a real Slurm (ctest label `slurm`, left out of the default suite:
# `ctest -L slurm`). It starts a one-node cluster on this machine (munged, slurmctld and slurmd with their own
# key, ports, state and logs under a temp dir; slurm-wlm and munge are installed when missing and this is root),
# prepares a tiny 4-run sweep once, writes its job array with `pagegram sweep slurm` and submits it; task 0 fails
# on purpose (its config.yaml is garbage) and task 3 is cancelled with scancel after its first checkpoint. Then
# `sweep slurm --missing` must cover exactly tasks 0 and 3, `sbatch --wait` of it finishes the sweep (task 3
# resumes from its checkpoint), `sweep collect` copies the runs into another directory, and their run records
# must equal those of a local `pagegram sweep run` of the same sweep: losses, curves, scalars and config
# bit-identical; timing, host, thread and path fields are ignored. The daemons are stopped on exit.
# Usage: tests/slurm/slurm_integration.sh [PAGEGRAM_BINARY]   (default: build/pagegram of this checkout)
# PG_SLURM_KEEP=1 keeps the temp dir (it is always kept, and named, when the test fails).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
PG=${1:-$SRC/build/pagegram}
T0=$(date +%s)
say() { echo "[slurm_integration $(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "slurm_integration: FAIL: $*" >&2; exit 1; }

[ -x "$PG" ] || fail "no pagegram binary at $PG (hint: build first: bash scripts/setup.sh --werror)"
PG=$(realpath "$PG")

# --- Slurm and munge -----------------------------------------------------------------------------------------
PG_SLURM_NAME=slurm_integration
source "$SRC/tests/slurm/cluster.sh"

# --- the sweep: the same file in three places (cluster, this "workstation", a local reference run) ------------
export PAGEGRAM_CACHE=$WORK/cache  # "shared storage" of the token stores: built once, read by every task
write_sweep() {  # DIR
  mkdir -p "$1"
  cat >"$1/sweep.yaml" <<EOF
# tests/slurm: configs/tiny.yaml on the fixture corpus, 2 variants x 2 seeds, 24 steps, checkpoints every 4 steps.
name: slurmtest
base: $SRC/configs/tiny.yaml
out_dir: $1/runs
seeds: [0, 1]
set:
  data.corpus: $SRC/tests/fixtures/corpus
  data.val_tokens: 2048
  tokenizer.vocab_size: 1024
  tokenizer.input_sentence_size: 4000
  model.vocab: 1024
  memory.target_params: 100000
  memory.inject_layers: [0, 1]
  train.steps: 24
  train.eval_interval: 8
  train.eval_windows: 16
  train.checkpoint_interval: 4
variants:
  flat: {memory.layout: flat}
  pagegram_s4: {memory.layout: pagegram, memory.slots: 4}
EOF
}
CL=$WORK/cluster HERE=$WORK/here LOCAL=$WORK/local
write_sweep "$CL"
write_sweep "$HERE"
write_sweep "$LOCAL"

say "sweep prepare (once, into $PAGEGRAM_CACHE)"
"$PG" sweep prepare "$CL/sweep.yaml"

say "sweep slurm: the job array of every run"
"$PG" sweep slurm "$CL/sweep.yaml" --out "$CL/job.sh" --cpus 1 --time 00:30:00 --partition pgtest
grep -q '^#SBATCH --array=0-3$' "$CL/job.sh" || fail "job.sh: no '#SBATCH --array=0-3' line"
mapfile -t RUNS <"$CL/runs/runs.txt"
[ ${#RUNS[@]} -eq 4 ] || fail "runs.txt has ${#RUNS[@]} lines, not 4"

# A task whose run another task or runner holds (flock on <run>/.lock) leaves it alone: task 1 outside Slurm.
exec 8>>"${RUNS[1]}/.lock"
flock -n 8 || fail "cannot lock ${RUNS[1]}/.lock"
out=$(SLURM_ARRAY_TASK_ID=1 SLURM_CPUS_PER_TASK=1 bash "$CL/job.sh" 8>&- 2>&1) || fail "task 1 with its run held: $out"
exec 8>&-
echo "$out" | grep -q 'another task or runner is running it; nothing to do' || fail "task 1 with its run held: $out"
[ ! -e "${RUNS[1]}/train.out" ] || fail "task 1 with its run held started training"

# Task 0 fails on purpose: its config is garbage (as a task whose node lost the file would). `--missing` later
# writes every unfinished run's config.yaml again.
echo "model: {layers: [garbage" >"${RUNS[0]}/config.yaml"

JOB=$(sbatch --parsable "$CL/job.sh")
JOB=${JOB%%;*}
say "submitted job array $JOB"

# Task 3 is cancelled mid-run, after a checkpoint and before the end: its trainer (pid from <run>/.train.lock, its
# command line checked) is stepped with SIGSTOP / SIGCONT until `sweep status` shows a checkpoint, then the task is
# scancel'ed while the trainer is stopped (Slurm sends SIGCONT + SIGTERM), so it dies at that checkpoint's step.
R3=${RUNS[3]}
NAME3=$(basename "$R3" | sed 's/-[0-9a-f]\{8\}$//')
status_of() {  # RUN_NAME -> "state ckpt" from `sweep status`
  "$PG" sweep status "$CL/sweep.yaml" | awk -v n="$1" '$1 == n { print $3, $5 }'
}
cancelled=""
for _ in $(seq 3000); do
  pid=$(sed -n 's/^pid \([0-9]*\):.*/\1/p' "$R3/.train.lock" 2>/dev/null || true)
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$R3/config.yaml" &&
     kill -STOP "$pid" 2>/dev/null; then
    read -r st ck <<<"$(status_of "$NAME3")"
    if [ "$st" = running ] && [ "$ck" != - ] && [ "$ck" -ge 4 ] && [ "$ck" -lt 24 ]; then
      say "task 3 ($NAME3): stopped with its checkpoint at step $ck; scancel ${JOB}_3"
      scancel "${JOB}_3"
      cancelled=$ck
      break
    fi
    kill -CONT "$pid" 2>/dev/null || true
    [ "$st" != finished ] || fail "task 3 ($NAME3) finished before it could be cancelled"
    sleep 0.02
  else
    sleep 0.1
  fi
done
[ -n "$cancelled" ] || fail "task 3 ($NAME3) never reached a checkpoint while running"

wait_job() {  # JOB: until it has left the queue
  for _ in $(seq 1200); do
    [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  fail "job $1 still in the queue after 10 min: $(squeue -j "$1" 2>&1 | tr '\n' ' ')"
}
wait_job "$JOB"
task_state() { scontrol show job "${JOB}_$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }
for t in 0 1 2 3; do say "task ${JOB}_$t: $(task_state $t)"; done
[ "$(task_state 0)" = FAILED ] || fail "task 0 should have FAILED, is $(task_state 0)"
[ "$(task_state 1)" = COMPLETED ] && [ "$(task_state 2)" = COMPLETED ] || fail "tasks 1 and 2 should have COMPLETED"
[ "$(task_state 3)" = CANCELLED ] || fail "task 3 should be CANCELLED, is $(task_state 3)"
ls "$CL"/runs/slurm-"${JOB}"_*.out >/dev/null 2>&1 || fail "no slurm-${JOB}_*.out in $CL/runs"

"$PG" sweep status "$CL/sweep.yaml" | tee "$WORK/status1.txt"
grep -q '2 failed, 2 finished' "$WORK/status1.txt" || fail "sweep status should count 2 failed, 2 finished"
grep -q "exit code 143 in Slurm task ${JOB}_3" "${R3}/failed.txt" || fail "task 3's failed.txt: $(cat "$R3/failed.txt" 2>&1)"

say "sweep slurm --missing: only tasks 0 and 3"
"$PG" sweep slurm "$CL/sweep.yaml" --out "$CL/job-missing.sh" --cpus 1 --time 00:30:00 --partition pgtest --missing |
  tee "$WORK/missing.txt"
grep -q '^#SBATCH --array=0,3$' "$CL/job-missing.sh" || fail "job-missing.sh: $(grep -- --array "$CL/job-missing.sh")"
grep -q "resumes from its checkpoint at step $cancelled/24" "$WORK/missing.txt" ||
  fail "--missing should say that task 3 resumes from step $cancelled"
JOB2=$(sbatch --parsable --wait "$CL/job-missing.sh") || fail "sbatch --wait of the missing runs failed (job $JOB2)"
JOB2=${JOB2%%;*}
say "job array $JOB2 (the missing runs) done"
grep -q "resuming at step $cancelled" "$R3/train.out" || fail "$R3/train.out: no 'resuming at step $cancelled'"
"$PG" sweep status "$CL/sweep.yaml" | tee "$WORK/status2.txt"
grep -q ': 4 finished;' "$WORK/status2.txt" || fail "after the resubmission every run should be finished"
out=$("$PG" sweep slurm "$CL/sweep.yaml" --out "$CL/job-none.sh" --missing)
echo "$out"
echo "$out" | grep -q '^nothing to submit' || fail "--missing with every run finished should submit nothing"
[ ! -e "$CL/job-none.sh" ] || fail "--missing with nothing to do wrote a script"

say "sweep collect into $HERE, records there"
"$PG" sweep collect "$HERE/sweep.yaml" --from "$CL/runs" | tee "$WORK/collect.txt"
grep -q 'collect slurmtest: 4 merged' "$WORK/collect.txt" || fail "collect should merge 4 runs"
"$PG" sweep record "$HERE/sweep.yaml"

say "local reference: sweep run into $LOCAL"
"$PG" sweep run "$LOCAL/sweep.yaml" 2>"$WORK/local_run.err" || { cat "$WORK/local_run.err"; fail "local sweep run failed"; }

say "comparing run records"
/usr/bin/python3 - "$HERE/records" "$LOCAL/records" "$(basename "$R3")" <<'PY'
import json, os, re, sys
a_dir, b_dir, resumed = sys.argv[1], sys.argv[2], sys.argv[3] + ".json"
names = sorted(os.listdir(a_dir))
assert names == sorted(os.listdir(b_dir)) and len(names) == 4, (names, os.listdir(b_dir))
# Timing, machine, thread count and the run directory (train.out_dir) may differ; nothing else.
ignored = {"host", "cpu", "threads", "compiler_flags", "started", "updated", "train_seconds", "tok_per_s_median",
           "revisions"}
def norm(r, name):
    r = {k: v for k, v in r.items() if k not in ignored}
    r["config"] = re.sub(r"(?m)^(\s*(out_dir|threads):).*$", r"\1 -", r["config"])
    # Collision reading (b) counts row owners from the step the process started at (memory/step_collisions.h:
    # "a resumed run starts them again at the resume step"): a diagnostic, not a result; other runs compare it.
    if name == resumed and r.get("collisions"):
        r["collisions"] = {k: v for k, v in r["collisions"].items() if not k.startswith("foreign_owner")}
    return r
bad = 0
for n in names:
    a = norm(json.load(open(os.path.join(a_dir, n))), n)
    b = norm(json.load(open(os.path.join(b_dir, n))), n)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    note = " (collisions.foreign_owner_* not compared: resumed)" if n == resumed else ""
    print(f"{n}: {'identical' + note if not diff else 'DIFFERENT in ' + ', '.join(diff)} "
          f"(held-out {a['final']['heldout_loss']!r} vs {b['final']['heldout_loss']!r}, {len(a['train']['loss'])} steps)")
    bad += bool(diff)
sys.exit(1 if bad else 0)
PY
say "PASS: Slurm job array, failed + cancelled tasks resubmitted with --missing, collected runs = local runs"
