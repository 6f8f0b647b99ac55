// The VDPBF16PS micro-kernels of the bf16 GEMM (kernels/gemm.h, kernels/kernels.h): the 14x32 register blocking of the
// fp32 AVX-512 micro-kernel, one 32-bit broadcast of an A pair and one VDPBF16PS per row and 16 columns per k pair.
// The only file compiled for AVX512_BF16 (target pragma below); used only when cpuid reports it (native_bf16).
// GCC 12 reports false -W(maybe-)uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/gemm.h"
#include "kernels/kernels.h"

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
// Rows: A's pair p of row i at ap[i * kRowWords + p] (a row-packed micro-panel) instead of ap[p * kMr + i].
template <int MR, bool Rows>
void kernel(int64_t kp, const uint32_t* __restrict ap, const uint32_t* __restrict bp, float* c, int64_t ldc, int64_t nr,
            bool load_c, const float* cn) {
  constexpr int64_t kRs = Rows ? kRowWords : 1, kPs = Rows ? 1 : kMr;
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
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i * kRs]));
      c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);
    }
    ap += kPs;
    bp += kNr;
  }
  for (; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i * kRs]));
      c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);
    }
    ap += kPs;
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
  return Bf16Micro{"vdpbf16ps", false, {&kernel<I + 1, false>...}, nullptr, {&kernel<I + 1, true>...}};
}
constexpr Bf16Micro kNative = make_native(std::make_integer_sequence<int, kMr>{});

}  // namespace
}  // namespace pg::kern::avx512bf16_impl

namespace pg::kern {
double bf16_dot_probe(int64_t iters) {
  // 16 independent VDPBF16PS chains in registers (more than latency x throughput of current cores), 32 bf16
  // products (64 FLOPs) each.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x3c003c00);  // 1, 2^-7
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
         c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm512_dpbf16_ps(c0, a, b);
    c1 = _mm512_dpbf16_ps(c1, a, b);
    c2 = _mm512_dpbf16_ps(c2, a, b);
    c3 = _mm512_dpbf16_ps(c3, a, b);
    c4 = _mm512_dpbf16_ps(c4, a, b);
    c5 = _mm512_dpbf16_ps(c5, a, b);
    c6 = _mm512_dpbf16_ps(c6, a, b);
    c7 = _mm512_dpbf16_ps(c7, a, b);
    c8 = _mm512_dpbf16_ps(c8, a, b);
    c9 = _mm512_dpbf16_ps(c9, a, b);
    c10 = _mm512_dpbf16_ps(c10, a, b);
    c11 = _mm512_dpbf16_ps(c11, a, b);
    c12 = _mm512_dpbf16_ps(c12, a, b);
    c13 = _mm512_dpbf16_ps(c13, a, b);
    c14 = _mm512_dpbf16_ps(c14, a, b);
    c15 = _mm512_dpbf16_ps(c15, a, b);
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                                               _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
                                 _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                               _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return 64.0 * 16.0 * static_cast<double>(iters);
}

const Bf16Micro* native_bf16() {
  static const bool has = isa::cpu_supports(isa::Isa::avx512) && isa::cpu_has_avx512bf16();
  return has ? &avx512bf16_impl::kNative : nullptr;
}
}  // namespace pg::kern
