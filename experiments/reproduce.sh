#!/usr/bin/env bash
# Reproduce the report's tables at this repository's small scale: one command, resumable (finished runs are skipped,
# interrupted ones resume from their checkpoints; re-run it after a kill).
# Usage: experiments/reproduce.sh [--only PATTERN] [--commit] [--report-only] [TARGET ...]
#   TARGET: table1 table2 table4_s_sweep table5_ablations table8_lr_grid nf4 storage (default: all, in that order),
#           regime_stage1 regime_factors regime_stage2 regime_table2 (issue 13, the regime-matched preset)
#   --only PATTERN: passed to `sweep run` (e.g. '*-s[012]' runs seeds 0-2 only; the reports cover what finished)
#   --commit: passed to `sweep run`: each run's record is git-committed as the run ends
#   --report-only: no build, no runs: the sweeps' READMEs from the committed records (experiments/RECORDS.md)
# Each sweep: `pagegram sweep prepare` (corpus, tokenizer, token store; cached), runs shared with table1 collected
# instead of re-run, `pagegram sweep run`, then experiments/report.py -> experiments/<table>/README.md + PNGs.
# nf4: every finished table1 PageGram run with its NF4 table -> experiments/table1/nf4.md.
# storage: Tables 3 and 6, Fig. 4a/4b on the shape-A tokenizer's test stream -> experiments/storage/.
# Cost on the 2-vCPU VM of README.md: ≈3.5 min per 2.5M-token run (table1 ≈ 75 min, all sweeps ≈ 6 h), storage ≈ 10 min.
set -euo pipefail
cd "$(dirname "$0")/.."
run_opts=()
report_only=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) run_opts+=(--only "$2"); shift 2 ;;
    --commit) run_opts+=(--commit); shift ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "reproduce: unknown option $1 (hint: --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(table1 table2 table4_s_sweep table5_ablations table8_lr_grid nf4 storage)
[ $report_only = 1 ] || bash scripts/setup.sh >/dev/null
P=build/pagegram
PY=/usr/bin/python3
stamp() { echo "[reproduce $(date -u +%H:%M:%S)] $*" >&2; }

for t in "${targets[@]}"; do
  case "$t" in
    table1|table2|table4_s_sweep|table5_ablations|table8_lr_grid|regime_stage1|regime_factors|regime_stage2|regime_table2)
      spec=experiments/$t/sweep.yaml
      if [ $report_only = 0 ]; then
        stamp "$t: prepare"
        $P sweep prepare "$spec"
        if [ "${t#regime_}" = "$t" ] && [ "$t" != table1 ] && [ -d runs/table1 ]; then
          $P sweep collect "$spec" --from runs/table1 || true  # shared runs (same name and config hash)
        fi
        stamp "$t: run"
        $P sweep run "$spec" "${run_opts[@]}"
      fi
      stamp "$t: report"
      extra=()  # Table 2 answers "does the gain shrink with 2x tokens": compare with Table 1's runs
      if [ "$t" = table2 ] && { [ -f runs/table1/sweep.json ] || compgen -G "experiments/table1/records/*.json" >/dev/null; }; then extra=(--compare-budget experiments/table1/sweep.yaml); fi
      if [ "$t" = regime_table2 ] && { [ -f runs/regime_stage2/sweep.json ] || compgen -G "experiments/regime_stage2/records/*.json" >/dev/null; }; then extra=(--compare-budget experiments/regime_stage2/sweep.yaml); fi
      $PY experiments/report.py "$spec" "${extra[@]}" --out "experiments/$t/"
      ;;
    nf4)
      [ $report_only = 0 ] || { stamp "nf4: needs the run directories (skipped with --report-only)"; continue; }
      stamp "nf4: table1 PageGram runs"
      experiments/nf4_runs.sh runs/table1 'pagegram_s4-s*' experiments/table1/nf4.md 2048
      ;;
    storage)
      if [ $report_only = 0 ]; then
        mkdir -p /tmp/pagegram-storage
        stamp "storage: flashsim (Table 6, Fig. 4a)"
        $P flashsim --config configs/shape_a.yaml --tokens 20000000 --out experiments/storage/flashsim_a.h5 \
          2>&1 | tee experiments/storage/flashsim_a.txt
        stamp "storage: collisions (Table 3)"
        $P collisions --config configs/shape_a.yaml --split validation --layouts flat,engram,pagegram:15,pagegram:4,pagegram:1 \
          --out experiments/storage/collisions_a_val.h5 2>&1 | tee experiments/storage/collisions_a_validation.txt
        stamp "storage: iobench (Fig. 4b)"
        $P iobench --config configs/shape_a.yaml --size 2e9 --tokens 200000 --seconds 5 --dir /tmp/pagegram-storage \
          --out experiments/storage/iobench_a.h5 2>&1 | tee experiments/storage/iobench_a.txt
      fi
      $PY experiments/report.py --flashsim experiments/storage/flashsim_a.h5 --iobench experiments/storage/iobench_a.h5 \
        --out experiments/storage
      ;;
    *) echo "reproduce: unknown target $t (hint: --help)" >&2; exit 2 ;;
  esac
done
stamp "done: ${targets[*]}"
