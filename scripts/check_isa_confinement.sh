#!/bin/bash
# check_isa_confinement.sh BINARY...: every AVX-512 instruction of the binaries lies in a function of the AVX-512
# kernel files (core/kernels_avx512*.cpp), which run only after cpuid said the CPU has AVX-512.
#
# The rest of the project is compiled for x86-64-v3 (AVX2 + FMA). An AVX-512 instruction anywhere else (an inline
# function or template instantiated inside an AVX-512 file and picked by the linker for every caller, a stray
# target attribute, -march=native leaking in) would crash with SIGILL on an AVX2-only machine, while every test on
# an AVX-512 machine stays green. AVX-512 instructions are EVEX-encoded (in 64-bit code: first opcode byte 0x62,
# after at most an address-size or segment prefix; objdump's continuation lines of a long instruction carry bytes but
# no mnemonic and are skipped), except the opmask instructions (kmov, kand, kortest...: VEX-encoded), found by their
# %k0-%k7 operands. A binary with no AVX-512 instruction at all is an error too (the kernel files are missing, or
# objdump's output changed and the check would see nothing). Allowed: functions in a namespace whose name ends in avx512_impl or
# avx512bf16_impl (the kernel files' and tests/core/bf16_test.cpp's CPU probes), and the kernel files' entry points
# pg::kern::avx512_kernels and pg::kern::bf16_dot_probe. Everything there runs only after a cpuid check.
#
# check_isa_confinement.sh --self-test: compiles a function with -mavx512f outside those names and checks it is found.
set -euo pipefail

# [(] rather than \( : awk -v would process the backslash (gawk drops it, leaving an unmatched parenthesis).
allowed='avx512_impl::|avx512bf16_impl::|pg::kern::avx512_kernels[(]|pg::kern::bf16_dot_probe[(]'

# Prints "count function" for every function with EVEX instructions outside the allowed names; returns 1 if any.
check() {
  local bin=$1 out
  command -v objdump >/dev/null || { echo "check_isa_confinement: objdump not found (hint: apt-get install binutils)" >&2; return 2; }
  [ -f "$bin" ] || { echo "check_isa_confinement: $bin: no such file" >&2; return 2; }
  local res total bad
  res=$(objdump -d -C "$bin" | awk -v allowed="$allowed" '
    /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn); next }
    /^ *[0-9a-f]+:\t((26|2e|36|3e|64|65|67) )?62 [^\t]*\t/ || /^ *[0-9a-f]+:\t[^\t]*\t.*%k[0-7]/ {
      total++; if (fn !~ allowed) n[fn]++ }
    END { printf "TOTAL %d\n", total; for (f in n) printf "%d %s\n", n[f], f }') || {
    echo "check_isa_confinement: $bin: objdump | awk failed" >&2; return 2; }
  total=$(printf '%s\n' "$res" | sed -n 's/^TOTAL //p')
  if [ "${total:-0}" -eq 0 ]; then
    echo "check_isa_confinement: $bin: no AVX-512 instruction found at all (hint: the kernel files should be there; is objdump's output format different?)" >&2
    return 2
  fi
  bad=$(printf '%s\n' "$res" | grep -v '^TOTAL ' || true)
  if [ -n "$bad" ]; then
    echo "check_isa_confinement: $bin: AVX-512 instructions outside the AVX-512 kernel files (would SIGILL on an AVX2-only CPU):" >&2
    printf '%s\n' "$bad" | sort -rn | head -20 | sed 's/^/  /' >&2
    echo "  (hint: keep AVX-512 code inside core/kernels_avx512*.cpp's namespaces; no std:: templates instantiated there)" >&2
    return 1
  fi
  echo "check_isa_confinement: $bin: ${total:-0} AVX-512 instructions, all in the AVX-512 kernel files"
}

if [ "${1:-}" = --self-test ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  cat > "$tmp/t.c" <<'EOF'
#include <immintrin.h>
__attribute__((noinline)) void stray_avx512(float* p) { _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), _mm512_set1_ps(1.0f))); }
__attribute__((noinline)) unsigned stray_kmask(unsigned a, unsigned b) { return _kand_mask16(_cvtu32_mask16(a), _cvtu32_mask16(b)); }
int main(int argc, char** argv) { float x[16] = {0}; (void)argv; if (__builtin_cpu_supports("avx512f")) { stray_avx512(x); return (int)stray_kmask((unsigned)argc, 3u) + (int)x[0]; } return 0; }
EOF
  cc -O2 -mavx512f -o "$tmp/t" "$tmp/t.c"
  if check "$tmp/t" 2>"$tmp/err"; then
    echo "check_isa_confinement --self-test: a stray AVX-512 function was not found" >&2; exit 1
  fi
  for f in stray_avx512 stray_kmask; do
    grep -q "$f" "$tmp/err" || { echo "check_isa_confinement --self-test: the report does not name $f:" >&2; cat "$tmp/err" >&2; exit 1; }
  done
  echo "check_isa_confinement --self-test: stray AVX-512 functions (EVEX and opmask) are found and named"
  exit 0
fi

[ $# -ge 1 ] || { echo "usage: check_isa_confinement.sh BINARY... | --self-test" >&2; exit 2; }
rc=0
for b in "$@"; do check "$b" || rc=1; done
exit $rc
