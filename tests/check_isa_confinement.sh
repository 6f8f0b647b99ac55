#!/bin/bash
# check_isa_confinement.sh BINARY...: every AVX-512 instruction of the binaries lies in a function of the AVX-512
# kernel files (kernels/kernels_avx512*.cpp), which run only after cpuid said the CPU has AVX-512.
#
# The rest of the project is compiled for x86-64-v3 (AVX2 + FMA). An AVX-512 instruction anywhere else (an inline
# function or template instantiated inside an AVX-512 file and picked by the linker for every caller, a stray
# target attribute, -march=native leaking in) would crash with SIGILL on an AVX2-only machine, while every test on
# an AVX-512 machine stays green. AVX-512 instructions are EVEX-encoded (in 64-bit code: first opcode byte 0x62,
# after at most an address-size or segment prefix; objdump's continuation lines of a long instruction carry bytes but
# no mnemonic and are skipped), except the opmask instructions (kmov, kand, kortest...: VEX-encoded), found by their
# %k0-%k7 operands. Finding none is an error too (objdump's output changed and the check would see nothing) if the
# binary has the kernel files' functions (nm) or if no binary given has any. Allowed: functions in a namespace whose name ends in avx512_impl or
# avx512bf16_impl (the kernel files' and tests/kernels/bf16_test.cpp's CPU probes), and the kernel files' entry points
# pg::kern::avx512_kernels and pg::kern::bf16_dot_probe. Everything there runs only after a cpuid check.
#
# AMX tile instructions (VEX-encoded: ldtilecfg, tileloadd, tdpbf16ps...) likewise lie only in kernels/kernels_amx.cpp's
# namespace amx_impl and its entry points pg::kern::amx_status and pg::kern::amx_dot_probe (run only after cpuid, XCR0
# and the kernel's tile permission said yes): anywhere else they would SIGILL on every machine without AMX.
#
# check_isa_confinement.sh --self-test: compiles functions with -mavx512f / -mamx-tile outside those names and checks
# they are found.
set -euo pipefail

# [(] rather than \( : awk -v would process the backslash (gawk drops it, leaving an unmatched parenthesis).
allowed='avx512_impl::|avx512bf16_impl::|pg::kern::avx512_kernels[(]|pg::kern::bf16_dot_probe[(]'
amx_allowed='amx_impl::|pg::kern::amx_status[(]|pg::kern::amx_dot_probe[(]'

# Prints "count function" for every function with EVEX instructions outside the allowed names; returns 1 if any.
check() {
  local bin=$1 out
  command -v objdump >/dev/null || { echo "check_isa_confinement: objdump not found (hint: apt-get install binutils)" >&2; return 2; }
  [ -f "$bin" ] || { echo "check_isa_confinement: $bin: no such file" >&2; return 2; }
  local res total bad
  res=$(objdump -d -C "$bin" | awk -v allowed="$allowed" -v amx_allowed="$amx_allowed" '
    /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn); next }
    /^ *[0-9a-f]+:\t[^\t]*\t(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd|tileloaddt1|tilestored|tdp[a-z0-9]+)( |$)/ {
      if (fn !~ amx_allowed) a[fn]++; next }
    /^ *[0-9a-f]+:\t((26|2e|36|3e|64|65|67) )?62 [^\t]*\t/ || /^ *[0-9a-f]+:\t[^\t]*\t.*%k[0-7]/ {
      total++; if (fn !~ allowed) n[fn]++ }
    END { printf "TOTAL %d\n", total; for (f in n) printf "%d %s\n", n[f], f; for (f in a) printf "%d AMX %s\n", a[f], f }') || {
    echo "check_isa_confinement: $bin: objdump | awk failed" >&2; return 2; }
  total=$(printf '%s\n' "$res" | sed -n 's/^TOTAL //p')
  bad=$(printf '%s\n' "$res" | grep ' AMX ' || true)
  if [ -n "$bad" ]; then
    echo "check_isa_confinement: $bin: AMX tile instructions outside kernels/kernels_amx.cpp's kernels (would SIGILL without AMX):" >&2
    printf '%s\n' "$bad" | sort -rn | head -20 | sed 's/ AMX / /; s/^/  /' >&2
    echo "  (hint: keep tile code inside namespace amx_impl, called only when kern::amx_bf16() is not null)" >&2
    return 1
  fi
  if [ "${total:-0}" -eq 0 ]; then
    # Nothing to confine if the binary links none of the kernel files (the linker may leave them out of a binary
    # that never calls a kernel, as it does for test_data in the sanitizer build). If it has their functions, zero
    # found means the check sees nothing.
    if nm -C "$bin" 2>/dev/null | grep -Eq "$allowed"; then
      echo "check_isa_confinement: $bin: has the AVX-512 kernel functions but no AVX-512 instruction was found (hint: is objdump's output format different?)" >&2
      return 2
    fi
    echo "check_isa_confinement: $bin: no AVX-512 instruction and no AVX-512 kernel function linked in (nothing to confine)"
    return 0
  fi
  found_any=1
  bad=$(printf '%s\n' "$res" | grep -v '^TOTAL ' || true)
  if [ -n "$bad" ]; then
    echo "check_isa_confinement: $bin: AVX-512 instructions outside the AVX-512 kernel files (would SIGILL on an AVX2-only CPU):" >&2
    printf '%s\n' "$bad" | sort -rn | head -20 | sed 's/^/  /' >&2
    echo "  (hint: keep AVX-512 code inside kernels/kernels_avx512*.cpp's namespaces; no std:: templates instantiated there)" >&2
    return 1
  fi
  echo "check_isa_confinement: $bin: ${total:-0} AVX-512 instructions, all in the AVX-512 kernel files"
}

# Checks every binary; also an error if none of them has any AVX-512 instruction.
check_all() {
  local rc=0 b
  found_any=0
  for b in "$@"; do check "$b" || rc=1; done
  if [ "$rc" -eq 0 ] && [ "$found_any" -eq 0 ]; then
    echo "check_isa_confinement: no AVX-512 instruction in any of the $# binaries (hint: the AVX-512 kernel files should be in pagegram at least; is objdump's output format different?)" >&2
    rc=2
  fi
  return $rc
}

if [ "${1:-}" = --self-test ]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  fail() { echo "check_isa_confinement --self-test: $1" >&2; [ -f "$tmp/err" ] && cat "$tmp/err" >&2; exit 1; }
  cat > "$tmp/t.c" <<'EOF'
#include <immintrin.h>
__attribute__((noinline)) void stray_avx512(float* p) { _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), _mm512_set1_ps(1.0f))); }
__attribute__((noinline)) unsigned stray_kmask(unsigned a, unsigned b) { return _kand_mask16(_cvtu32_mask16(a), _cvtu32_mask16(b)); }
int main(int argc, char** argv) { float x[16] = {0}; (void)argv; if (__builtin_cpu_supports("avx512f")) { stray_avx512(x); return (int)stray_kmask((unsigned)argc, 3u) + (int)x[0]; } return 0; }
EOF
  cc -O2 -mavx512f -o "$tmp/t" "$tmp/t.c"
  check_all "$tmp/t" 2>"$tmp/err" && fail "a stray AVX-512 function was not found"
  for f in stray_avx512 stray_kmask; do
    grep -q "$f" "$tmp/err" || fail "the report does not name $f:"
  done
  # A binary without AVX-512 code passes beside one with confined kernels, fails alone (the check would see
  # nothing), and fails if it has a kernel entry point's name but no AVX-512 instruction in it.
  cat > "$tmp/plain.c" <<'EOF'
int main(void) { return 0; }
EOF
  cc -O2 -o "$tmp/plain" "$tmp/plain.c"
  cat > "$tmp/named.cpp" <<'EOF'
namespace pg::kern { __attribute__((noinline)) int avx512_kernels() { return 1; } }
int main() { return pg::kern::avx512_kernels(); }
EOF
  c++ -O2 -o "$tmp/named" "$tmp/named.cpp"
  cat > "$tmp/ok.cpp" <<'EOF'
#include <immintrin.h>
namespace pg::kern { __attribute__((noinline, target("avx512f"))) void avx512_kernels(float* p) { _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), _mm512_set1_ps(1.0f))); } }
int main() { float x[16] = {0}; if (__builtin_cpu_supports("avx512f")) pg::kern::avx512_kernels(x); return (int)x[0]; }
EOF
  c++ -O2 -o "$tmp/ok" "$tmp/ok.cpp"
  check_all "$tmp/ok" "$tmp/plain" >/dev/null 2>"$tmp/err" || fail "confined kernels beside a binary without AVX-512 code were refused:"
  check_all "$tmp/plain" >/dev/null 2>"$tmp/err" && fail "a check that found no AVX-512 instruction anywhere passed"
  grep -q "no AVX-512 instruction in any" "$tmp/err" || fail "finding nothing anywhere is not explained:"
  check_all "$tmp/named" "$tmp/ok" >/dev/null 2>"$tmp/err" && fail "a kernel entry point without AVX-512 instructions passed"
  grep -q "has the AVX-512 kernel functions but no AVX-512 instruction" "$tmp/err" || fail "a kernel entry point without AVX-512 instructions is not explained:"
  cat > "$tmp/amx.cpp" <<'EOF'
#include <immintrin.h>
namespace pg::kern::amx_impl { __attribute__((noinline, target("amx-tile"))) void fine() { _tile_release(); } }
__attribute__((noinline, target("amx-tile"))) void stray_amx() { _tile_zero(1); _tile_release(); }
int main(int argc, char**) { if (argc > 5) { pg::kern::amx_impl::fine(); stray_amx(); } return 0; }
EOF
  c++ -O2 -o "$tmp/amx" "$tmp/amx.cpp"
  check_all "$tmp/amx" "$tmp/ok" >/dev/null 2>"$tmp/err" && fail "a stray AMX function was not found"
  grep -q "stray_amx" "$tmp/err" || fail "the report does not name stray_amx:"
  grep -q "amx_impl::fine" "$tmp/err" && fail "the report names a function of amx_impl:"
  echo "check_isa_confinement --self-test: stray AVX-512 functions (EVEX and opmask) and stray AMX tile instructions are found and named; a binary without kernels passes beside others; finding nothing anywhere, or nothing in a binary with the kernels, fails"
  exit 0
fi

[ $# -ge 1 ] || { echo "usage: check_isa_confinement.sh BINARY... | --self-test" >&2; exit 2; }
check_all "$@"
