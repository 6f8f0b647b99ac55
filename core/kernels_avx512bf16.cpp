// The VDPBF16PS micro-kernels of the bf16 GEMM (core/gemm.h, core/kernels.h): the 14x32 register blocking of the
// fp32 AVX-512 micro-kernel, one 32-bit broadcast of an A pair and one VDPBF16PS per row and 16 columns per k pair.
// The only file compiled for AVX512_BF16 (target pragma below); used only when cpuid reports it (native_bf16).
// GCC 12 reports false -W(maybe-)uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/gemm.h"
#include "core/kernels.h"

#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,bmi2")

namespace pg::kern::avx512bf16_impl {
namespace {

using gemm::kMr;
using gemm::kNr;

inline __mmask16 tail(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1u);
}

// C[0:MR, 0:nr] = [C +] sum over kp pairs of ap[p, 0:MR] . bp[p, 0:32]; VDPBF16PS per lane: c += a_odd * b_odd,
// then c += a_even * b_even (fp32 FMAs, DAZ in, FTZ out, round to nearest even; MXCSR not used).
template <int MR>
void kernel(int64_t kp, const uint32_t* __restrict ap, const uint32_t* __restrict bp, float* c, int64_t ldc,
            int64_t nr, bool load_c, const float* cn) {
  const __mmask16 m0 = tail(nr), m1 = tail(nr - 16);
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    if (load_c) {
      c0[i] = _mm512_maskz_loadu_ps(m0, c + i * ldc);
      c1[i] = _mm512_maskz_loadu_ps(m1, c + i * ldc + 16);
    } else {
      c0[i] = _mm512_setzero_ps();
      c1[i] = _mm512_setzero_ps();
    }
  }
  int64_t p = 0;
  const int64_t pp = std::min<int64_t>(kp, MR);
  for (; p < pp; ++p) {  // the first steps also prefetch the next C tile (as the fp32 micro-kernel does)
    __builtin_prefetch(cn + p * ldc, 1, 3);
    __builtin_prefetch(cn + p * ldc + 16, 1, 3);
    __builtin_prefetch(cn + p * ldc + 31, 1, 3);
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
      c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);
    }
    ap += kMr;
    bp += kNr;
  }
  for (; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
      c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);
    }
    ap += kMr;
    bp += kNr;
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(c + i * ldc, m0, c0[i]);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, c1[i]);
  }
}

template <int... I>
constexpr Bf16Micro make_native(std::integer_sequence<int, I...>) {
  return Bf16Micro{"vdpbf16ps", false, {&kernel<I + 1>...}};
}
constexpr Bf16Micro kNative = make_native(std::make_integer_sequence<int, kMr>{});

}  // namespace
}  // namespace pg::kern::avx512bf16_impl

namespace pg::kern {
const Bf16Micro* native_bf16() {
  static const bool has = isa::cpu_supports(isa::Isa::avx512) && isa::cpu_has_avx512bf16();
  return has ? &avx512bf16_impl::kNative : nullptr;
}
}  // namespace pg::kern
