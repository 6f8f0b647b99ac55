#!/usr/bin/env bash
# Training throughput: ours (`pagegram bench train --synthetic`) vs the PyTorch reference model
# (../shared/bench/torch_reference_bench.py, "best tuning" of PERFORMANCE.md: OpenBLAS AVX-512 kernels,
# pinned threads (one per logical CPU), jemalloc) on shapes A and B, in one run, 2 threads each, one after the other.
# Usage: bench/bench_vs_torch.sh [--steps N] [--shapes A,B,regime,regime384,report] [--memory none,flat,engram,pagegram_s4]
#                                  [--torch-env tuned|plain] [--isa auto|avx2,avx512] [--precision fp32,bf16,autocast]
# Shapes: A = configs/a (the paper's d 384, vocab 65,536, T 1,024), B = configs/b (d 192, vocab 8,192, T 256), and the
# regime preset configs/regime.yaml at three widths: regime (d 128, 4 heads, vocab 8,192, T 128), regime384 (d 384,
# 6 heads, vocab 8,192: experiments/regime_d384) and report (d 384, 6 heads, vocab 65,536: the report's model,
# experiments/regime_report_model); the regime shapes run one micro-batch of 64 windows (8,192 tokens) a step on both
# sides. PyTorch runs twice per shape and kernel set: fp32, and under BF16 autocast (`--autocast bf16`: the forward in
# torch.autocast, fp32 master weights and AdamW); an fp32 row's ratio is to PyTorch fp32, a bf16 row's to PyTorch
# BF16 autocast.
# --isa runs ours once per kernel set (PAGEGRAM_ISA); every row names the set and its share of the FMA peak
# measured by `pagegram bench peak` in the same run. PyTorch beside `--isa avx2` is held to AVX2 as well
# (OPENBLAS_CORETYPE=Haswell, ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2): on an AVX-512 machine the avx2 rows
# then compare both programs as an AVX2-only CPU of the same clock would run them (an estimate for such a CPU, not a
# measurement on one).
# --precision runs ours once per train.precision (bf16: BF16 GEMM operands, fp32 accumulation, as PyTorch's autocast;
# the PyTorch reference runs fp32); a bf16 row's share is of the bf16 peak (`bench peak`: VDPBF16PS chains, or the
# FMA peak where bf16 is emulated with one fp32 FMA per product).
# --memory names the variant presets configs/a/<v>.yaml and configs/b/<v>.yaml (tables sized to the shape: 200M at A,
# 10M at B); the overhead column is relative to the first variant of the list.
# --torch-env plain runs PyTorch without the pinning/jemalloc/OpenBLAS-kernel settings (default: tuned = OpenBLAS's
# AVX-512 kernels forced with OPENBLAS_CORETYPE=SkylakeX, OMP threads pinned, jemalloc keeping freed memory: MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1).
# Debian's python3-torch calls the system BLAS through libblas.so.3: without an OpenBLAS package that alternative is
# the netlib reference BLAS (≈2 GFLOP/s; PyTorch then trains shape B at ≈120 tok/s), so this script installs
# libopenblas0-pthread, which update-alternatives then selects.
# Prints a Markdown table: tok/s, GFLOP/s, peak RSS and the ratio ours / PyTorch. Both sides are their median timed
# step (the PyTorch bench reports its median step; `bench train` prints the median beside its mean), with the range of
# our steps beside it: on a VM whose neighbours take the cores for a while the mean of a few steps is not a figure.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=4
shapes=A,B
memories=none
torch_env=tuned
isas=auto
precisions=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --memory) memories="$2"; shift 2 ;;
    --torch-env) torch_env="$2"; shift 2 ;;
    --isa) isas="$2"; shift 2 ;;
    --precision) precisions="$2"; shift 2 ;;
    *) echo "bench_vs_torch: unknown option $1" >&2; exit 2 ;;
  esac
done
shared="${PAGEGRAM_SHARED:-$(pwd)/../shared}"
torch_bench="$shared/bench/torch_reference_bench.py"
[ -f "$torch_bench" ] || { echo "bench_vs_torch: $torch_bench not found (hint: set PAGEGRAM_SHARED)" >&2; exit 2; }
need=()
for p in python3-torch libjemalloc2 libopenblas0-pthread time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -n "${PAGEGRAM:-}" ] || bash scripts/setup.sh >/dev/null   # PAGEGRAM=<binary>: measure that build as it is
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo "?")
case "$blas" in
  *openblas*) ;;
  *) echo "bench_vs_torch: warning: libblas.so.3 is $blas, not OpenBLAS: PyTorch will be far slower than its best" >&2 ;;
esac
echo "PyTorch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null), BLAS $blas, environment $torch_env; $(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo
P=${PAGEGRAM:-build/pagegram}
jemalloc=$(ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 2>/dev/null || true)

# PyTorch through a prelude that prints the BLAS library and the OpenBLAS kernel (core) it really runs.
torch_run() {
  /usr/bin/python3 - "$@" <<'PY'
import ctypes, runpy, sys
import torch  # loads the BLAS
lib = None
for line in open("/proc/self/maps"):
    f = line.split()[-1] if len(line.split()) >= 6 else ""
    if "openblas" in f or "libblas" in f:
        lib = f
        break
core = "?"
if lib:
    try:
        h = ctypes.CDLL(lib)
        h.openblas_get_corename.restype = ctypes.c_char_p
        h.openblas_get_config.restype = ctypes.c_char_p
        core = h.openblas_get_corename().decode() + " (" + h.openblas_get_config().decode().strip() + ")"
    except (OSError, AttributeError):
        core = "not OpenBLAS"
print(f"torch BLAS: {lib} core {core}", flush=True)
cap = next((l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines() if "CPU capability" in l), "?")
print(f"torch ATen: CPU capability {cap}", flush=True)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
}

rss_of() { awk '/Maximum resident set size/ {printf "%.0f", $6/1024}' "$1"; }

IFS=, read -ra isa_list <<< "$isas"
IFS=, read -ra prec_list <<< "$precisions"
declare -A peak
for isa in "${isa_list[@]}"; do
  out=$(PAGEGRAM_ISA=$isa $P bench peak)
  peak[$isa,fp32]=$(sed -n 's/^fma peak \([0-9.]*\) .*/\1/p' <<< "$out")
  bf=$(sed -n 's/^bf16 peak \([0-9.]*\) .*/\1/p' <<< "$out")
  peak[$isa,bf16]=${bf:-${peak[$isa,fp32]}}  # emulated bf16: one fp32 FMA per product
  echo "$(tr '\n' ' ' <<< "$out")"
done
echo
echo "| shape | memory | precision | kernels | ours tok/s (median step) | ours steps, slowest–fastest | vs ${memories%%,*} | ours GFLOP/s | share of peak | ours peak RSS MiB | PyTorch fp32 tok/s | PyTorch bf16 autocast tok/s | PyTorch GFLOP/s (fp32 / bf16) | PyTorch peak RSS MiB (fp32 / bf16) | ratio to PyTorch at this precision |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
IFS=, read -ra shape_list <<< "$shapes"
IFS=, read -ra mem_list <<< "$memories"
regime_sets=(--set train.tokens_per_step=8192 --set train.micro_batch=64)
for shape in "${shape_list[@]}"; do
  case "$shape" in
    A) dir=configs/a; targs=(--layers 6 --d 384 --heads 6 --vocab 65536 --seq 1024 --batch 4)
       sets=(--set train.tokens_per_step=4096 --set train.micro_batch=4) ;;
    B) dir=configs/b; targs=(--layers 6 --d 192 --heads 6 --vocab 8192 --seq 256 --batch 32)
       sets=(--set train.tokens_per_step=8192 --set train.micro_batch=32) ;;
    regime) dir=regime; targs=(--layers 6 --d 128 --heads 4 --vocab 8192 --seq 128 --batch 64)
       sets=("${regime_sets[@]}") ;;
    regime384) dir=regime; targs=(--layers 6 --d 384 --heads 6 --vocab 8192 --seq 128 --batch 64)
       sets=("${regime_sets[@]}" --set model.d_model=384 --set model.heads=6) ;;
    report) dir=regime; targs=(--layers 6 --d 384 --heads 6 --vocab 65536 --seq 128 --batch 64)
       sets=("${regime_sets[@]}" --set model.d_model=384 --set model.heads=6 --set model.vocab=65536
             --set tokenizer.vocab_size=65536) ;;
    *) echo "bench_vs_torch: unknown shape $shape (A, B, regime, regime384 or report)" >&2; exit 2 ;;
  esac
  for isa in "${isa_list[@]}"; do
  # PyTorch once per kernel set: on its best kernels beside ours on auto/avx512, on AVX2 kernels beside avx2.
  if [ "$torch_env" = tuned ]; then
    # OpenBLAS 0.3.21 does not know newer Intel cores (e.g. Sapphire Rapids) and falls back to slow generic kernels
    # (30-57 GFLOP/s on 2 threads here); forcing its AVX-512 kernels gives 178.
    coretype=$(grep -q avx512f /proc/cpuinfo && echo SkylakeX || echo Haswell)
    caps=()
    if [ "$isa" = avx2 ]; then coretype=Haswell; caps=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2); fi
    tenv=(env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=$coretype "${caps[@]}" OMP_PROC_BIND=true OMP_PLACES=threads ${jemalloc:+LD_PRELOAD=$jemalloc MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1})
  else
    tenv=(env)
  fi
  declare -A t_toks t_gf t_rss
  for ac in none bf16; do
    tlog=$(mktemp); ttime=$(mktemp)
    "${tenv[@]}" /usr/bin/time -v -o "$ttime" bash -c "$(declare -f torch_run); torch_run \"\$@\"" _ "$torch_bench" "${targs[@]}" --steps "$steps" --warmup 2 --threads 2 --autocast $ac > "$tlog" 2>&1 || true
    [ $ac = none ] && echo "shape $shape, beside ours on $isa: $(grep '^torch BLAS' "$tlog"); $(grep '^torch ATen' "$tlog")" >&2
    t_toks[$ac]=$(sed -n 's/.* \([0-9]*\) tok\/s, implied.*/\1/p' "$tlog")
    t_gf[$ac]=$(sed -n 's/.*implied \([0-9.]*\) GFLOP.*/\1/p' "$tlog")
    t_rss[$ac]=$(rss_of "$ttime")
    # A PyTorch run that fails leaves its columns empty and the ratio '?' (the reason is shown): e.g. BF16 autocast held
    # to AVX2, where this oneDNN has no bf16 primitive ("could not create a primitive descriptor iterator").
    [ -n "${t_toks[$ac]}" ] || { echo "bench_vs_torch: PyTorch (autocast $ac, $isa) printed no result:" >&2; tail -2 "$tlog" >&2; }
    rm -f "$tlog" "$ttime"
  done
  for prec in "${prec_list[@]}"; do
  first=""
  for mem in "${mem_list[@]}"; do
    if [ "$dir" = regime ]; then
      cfg=configs/regime.yaml
      case "$mem" in
        none|flat|engram) msets=(--set memory.layout=$mem) ;;
        pagegram_s*) msets=(--set memory.layout=pagegram --set memory.slots=${mem#pagegram_s}) ;;
        *) echo "bench_vs_torch: --memory $mem: the regime shapes take none, flat, engram, pagegram_sN" >&2; exit 2 ;;
      esac
    else
      cfg="$dir/$mem.yaml"; msets=()
      [ -f "$cfg" ] || { echo "bench_vs_torch: no preset $cfg (hint: --memory takes names of configs/a, configs/b)" >&2; exit 2; }
    fi
    olog=$(mktemp); otime=$(mktemp)
    PAGEGRAM_ISA=$isa /usr/bin/time -v -o "$otime" $P bench train --config "$cfg" --synthetic --steps "$steps" --warmup 2 \
      "${sets[@]}" "${msets[@]}" --set train.precision="$prec" > "$olog" 2>&1 || { cat "$olog" >&2; exit 1; }
    # The median step on both sides (the PyTorch bench's RESULT line is its median step).
    o_toks=$(sed -n 's/^median step tok\/s \([0-9]*\) .*/\1/p' "$olog")
    o_gf=$(sed -n 's/^median step tok\/s [0-9]*  GFLOP\/s \([0-9.]*\) .*/\1/p' "$olog")
    o_spread=$(sed -n 's/.*fastest step \([0-9]*\), slowest \([0-9]*\) tok\/s.*/\2–\1/p' "$olog")
    o_isa=$(sed -n 's/^kernels \([^ ]*\) .*/\1/p' "$olog")
    pk=fp32; [ "$prec" = fp32 ] || pk=bf16  # bf16 and any bf16-operand mode: the bf16 peak
    share=$(awk -v a="$o_gf" -v b="${peak[$isa,$pk]}" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "?" }')
    o_rss=$(rss_of "$otime")
    ac=none; [ "$prec" = fp32 ] || ac=bf16
    ratio=$(awk -v a="$o_toks" -v b="${t_toks[$ac]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }')
    [ -n "$first" ] || first="$o_toks"
    rel=$(awk -v a="$o_toks" -v b="$first" 'BEGIN { printf "%+.1f%%", 100 * (a / b - 1) }')
    echo "| $shape | $mem | $prec | $o_isa | $o_toks | $o_spread | $rel | $o_gf | $share | $o_rss | ${t_toks[none]} | ${t_toks[bf16]} | ${t_gf[none]} / ${t_gf[bf16]} | ${t_rss[none]} / ${t_rss[bf16]} | $ratio |"
    rm -f "$olog" "$otime"
  done
  done
  done
done
