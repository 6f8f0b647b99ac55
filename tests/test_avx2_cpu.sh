#!/usr/bin/env bash
# test_avx2_cpu.sh [BUILD_DIR]: the test suite on an emulated AVX2-only CPU.
#
# qemu-user runs the test binaries of BUILD_DIR (default build/) with the CPU model Haswell: AVX2, FMA, BMI2, no
# AVX-512. cpuid there says no AVX-512, so the kernels are chosen as on a real AVX2-only machine (no PAGEGRAM_ISA),
# and an AVX-512 instruction on any path the suite runs in its own process stops the test with SIGILL. This is the run-time half of
# the check; tests/check_isa_confinement.sh is the static half (every AVX-512 instruction of the binaries lies in
# the kernel files). Child processes a test starts (the `pagegram` CLI in the export, disk-full, kill/resume and
# sweep tests) run natively: qemu-user does not follow exec; that binary is covered by the static check and by the
# in-process tests of the same code. QEMU's TCG implements AVX2 and FMA in software since QEMU 7.2 (Debian 12's;
# an older one would report SIGILL for AVX2 itself), IEEE operations with the same bits, about 10-30x slower than
# the host, so the slowest tests (Bf16Train.FollowsFp32WithEveryLayout and AmxOrderFollowsFp32AndIsThreadIndependent,
# 50 steps x 4 layouts x 2 precisions each; they run natively with PAGEGRAM_ISA=avx2 in the test command) are left out. io_uring is not emulated:
# the direct table source falls back to pread there (storage/table_source.h) and the iobench tests skip.
# Installs qemu-user when missing (Debian). Used by .ci/run. 2026-12-06, Zen 4 VM, 2 jobs: 897 s, of which test_train alone
# 735 s (the other nine binaries 385 s together, run beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build}
[ -x "$bdir/pagegram" ] || { echo "test_avx2_cpu: $bdir/pagegram not found (hint: bash scripts/setup.sh first)" >&2; exit 2; }
if ! command -v qemu-x86_64 >/dev/null; then
  echo "test_avx2_cpu: installing qemu-user" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends qemu-user >/dev/null
fi
# Haswell without the features TCG cannot provide (it would warn about each on every start).
cpu=Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm
unset PAGEGRAM_ISA PAGEGRAM_BF16 PAGEGRAM_DIRECT_IO
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
start=$(date +%s)

v=$(qemu-x86_64 -cpu "$cpu" "$bdir/pagegram" --version)
echo "$v" | sed 's/^/  /'
if ! echo "$v" | grep -q '^kernels: avx2 (bf16: emulated'; then
  echo "test_avx2_cpu: on an AVX2-only CPU the binary must choose the AVX2 kernels and emulated bf16 by itself" >&2
  exit 1
fi

# Left out: the two slowest bf16 trainings (run natively with PAGEGRAM_ISA=avx2), and the cold-mmap read test:
# qemu-user accepts madvise(MADV_RANDOM) but does not pass it to the host kernel (a kernel behaviour, not an ISA one).
skip='Bf16Train.FollowsFp32WithEveryLayout:Bf16Train.AmxOrderFollowsFp32AndIsThreadIndependent:TableSource.ColdMmapReadsAboutTheBlocksItWants'
rc=0
ran=0
# The test binaries run two at a time (PAGEGRAM_QEMU_JOBS): emulation is slow and mostly single-threaded, so two
# emulated processes keep both cores busy. test_train (the trainings, 2/3 of the emulated time) runs one test suite
# per job (--gtest_filter=Suite.*: each suite's shared set-up runs once, as in one process), its jobs queued first so
# that no long job is left running alone at the end. Each job writes its own log; results are reported per binary in
# the binaries' order.
jobs_max=${PAGEGRAM_QEMU_JOBS:-2}
split=${PAGEGRAM_QEMU_SPLIT:-test_train}  # binaries run suite by suite
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_one() {  # one job (a binary, or one suite of it) under qemu: its log, exit code and seconds in $work
  local t=$1 k=$2 filter=$3 name s
  name=$(basename "$t").$k
  s=$(date +%s)
  set +e
  qemu-x86_64 -cpu "$cpu" "$t" --gtest_brief=1 --gtest_filter="$filter-$skip" >"$work/$name.log" 2>&1
  echo $? >"$work/$name.rc"
  echo $(( $(date +%s) - s )) >"$work/$name.secs"
}
binaries=()
for t in "$bdir"/tests/test_*; do
  [ -x "$t" ] && [ -f "$t" ] || continue
  case "$t" in *.cmake) continue ;; esac
  binaries+=("$t")
done
is_split() { case " $split " in *" $(basename "$1") "*) return 0 ;; esac; return 1; }
suites_of() {  # the test suites of a binary (listed natively: listing runs no kernel)
  "$1" --gtest_list_tests | sed -n 's/^\([^ ][^ ]*\)\.$/\1/p'
}
queue=()  # "binary job-number filter", the split binaries' suites first
declare -A njobs
for t in "${binaries[@]}"; do
  if is_split "$t"; then
    k=0
    for suite in $(suites_of "$t"); do queue+=("$t $k $suite.*"); k=$((k + 1)); done
    njobs[$t]=$k
  fi
done
for t in "${binaries[@]}"; do is_split "$t" || { queue+=("$t 0 *"); njobs[$t]=1; }; done
for j in "${queue[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  # shellcheck disable=SC2086  # the job's three words
  set -f; run_one $j & set +f
done
wait
for t in "${binaries[@]}"; do
  ran=$((ran + 1))
  name=$(basename "$t")
  n=${njobs[$t]}
  passed=0 skipped=0 secs=0 failed=0
  for k in $(seq 0 $((n - 1))); do
    log="$work/$name.$k.log"
    code=$(cat "$work/$name.$k.rc" 2>/dev/null || echo 1)
    secs=$(( secs + $(cat "$work/$name.$k.secs" 2>/dev/null || echo 0) ))
    if [ "$code" -eq 0 ]; then
      p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log")
      sk=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$log")
      if [ -z "$p" ]; then
        echo "test_avx2_cpu: $name (job $k of $n) exited 0 without a GoogleTest summary" >&2
        tail -5 "$log" >&2
        failed=1
      fi
      passed=$(( passed + ${p:-0} )); skipped=$(( skipped + ${sk:-0} ))
    else
      echo "test_avx2_cpu: $name (job $k of $n) failed on the emulated AVX2-only CPU (exit $code$([ "$code" -eq 132 ] && echo ': SIGILL, an instruction this CPU lacks'))" >&2
      grep -E '^\[  FAILED  \]|Failure|SIGILL|Illegal' "$log" | head -20 >&2 || true
      tail -5 "$log" >&2
      failed=1
    fi
  done
  [ "$failed" -eq 0 ] || rc=1
  [ "$skipped" -gt 0 ] || skipped=""
  echo "  $name: $passed passed${skipped:+, $skipped skipped} ($secs s$([ "$n" -gt 1 ] && echo " in $n suite jobs"))"
done
if [ "$ran" -eq 0 ]; then
  echo "test_avx2_cpu: no test binaries in $bdir/tests (hint: bash scripts/setup.sh builds them)" >&2
  rc=1
fi
echo "== emulated AVX2-only CPU ($cpu): $([ $rc -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $rc
