// The AVX-512 kernel table (kernels/kernels.h): 14x32 broadcast-FMA GEMM micro-kernel (two zmm per row), packing
// with 16x16 transposes, 16-lane element-wise math. Compiled for AVX-512 F/BW/DQ/VL by the target pragma
// below (only this file); called only when the CPU has them. Everything this file defines is in its own
// namespace, so no inline function compiled for AVX-512 can be picked by the linker for other code.
// GCC 12 reports false -W(maybe-)uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/gemm.h"
#include "kernels/kernels.h"

#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi2")

namespace pg::kern::avx512_impl {
namespace {

using gemm::kMr;
using gemm::kNr;
using gemm::View;

// ---- 16-float vector ----
using V = __m512;
using Mk = __mmask16;
inline Mk tail(int64_t n) {
  return n >= 16 ? static_cast<Mk>(0xFFFF) : static_cast<Mk>((1u << std::max<int64_t>(n, 0)) - 1u);
}
inline V load(const float* p, Mk m) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, Mk m, V v) { _mm512_mask_storeu_ps(p, m, v); }
inline V loadf(const float* p) { return _mm512_loadu_ps(p); }
inline void storef(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V set1(float x) { return _mm512_set1_ps(x); }
inline V zero() { return _mm512_setzero_ps(); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
inline V min_(V a, V b) { return _mm512_min_ps(a, b); }
inline V max_(V a, V b) { return _mm512_max_ps(a, b); }
inline V floor_(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline V scalef_(V y, V m) { return _mm512_scalef_ps(y, m); }
inline V zero_where_lt(V res, V x, float thr) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(thr), _CMP_LT_OQ), res, _mm512_setzero_ps());
}
inline V maskz(Mk m, V v) { return _mm512_maskz_mov_ps(m, v); }
inline V mask_max(V acc, Mk m, V x) { return _mm512_mask_max_ps(acc, m, acc, x); }
// Horizontal sum of 16 lanes in a fixed tree order (kernels_avx2.cpp repeats it on two 8-lane halves).
inline float hsum(V v) {
  __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
inline float hmax(V v) {
  __m256 a = _mm256_max_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  __m128 b = _mm_max_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  b = _mm_max_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(1, 0, 3, 2)));
  b = _mm_max_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(b);
}

// ---- packing ----
// In-place transpose of a 16x16 block held as 16 row vectors: afterwards r[j] holds column j.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    __m512d a0 = _mm512_castps_pd(t[4 * i]), a1 = _mm512_castps_pd(t[4 * i + 1]);
    __m512d a2 = _mm512_castps_pd(t[4 * i + 2]), a3 = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
  }
}

// ap[k * kMr + i] = A(i, k) for i < mr, k < kc; lanes i >= mr are zero. Each k is written with a full 16-lane
// store whose two extra lanes the next k overwrites; only the last k uses a 14-lane masked store, so nothing
// outside the panel is touched.
void pack_a_panel(float* ap, View a, int64_t mr, int64_t kc) {
  if (a.rs == 1) {  // column-contiguous (A = Xᵀ): each k is one contiguous run of mr floats
    const __mmask16 m = tail(mr);
    for (int64_t k = 0; k + 1 < kc; ++k) _mm512_storeu_ps(ap + k * kMr, _mm512_maskz_loadu_ps(m, a.p + k * a.cs));
    _mm512_mask_storeu_ps(ap + (kc - 1) * kMr, 0x3FFF, _mm512_maskz_loadu_ps(m, a.p + (kc - 1) * a.cs));
  } else if (a.cs == 1) {  // row-major: transpose 16-wide k strips
    __m512 r[16];
    for (int64_t k = 0; k < kc; k += 16) {
      const int64_t kk = std::min<int64_t>(16, kc - k);
      const __mmask16 m = tail(kk);
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < mr ? _mm512_maskz_loadu_ps(m, a.p + i * a.rs + k) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t j = 0; j < kk; ++j) {
        if (k + j + 1 < kc) _mm512_storeu_ps(ap + (k + j) * kMr, r[j]);
        else _mm512_mask_storeu_ps(ap + (k + j) * kMr, 0x3FFF, r[j]);
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < kMr; ++i) ap[k * kMr + i] = i < mr ? a.at(i, k) : 0.0f;
  }
}

// All row panels of an A block (mc x kc) into ap (panel stride kc * kMr). An M-contiguous A is read row by
// row (k outer: one streaming pass over the source), others panel by panel.
void pack_a_block(float* ap, View a, int64_t mc, int64_t kc) {
  const int64_t np = (mc + kMr - 1) / kMr;
  if (a.rs == 1 && np > 1) {
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = a.p + k * a.cs;
      for (int64_t q = 0; q < np; ++q) {
        const __m512 v = _mm512_maskz_loadu_ps(tail(std::min(kMr, mc - q * kMr)), src + q * kMr);
        float* d = ap + q * kc * kMr + k * kMr;
        if (k + 1 < kc) _mm512_storeu_ps(d, v);  // lanes 14, 15 land in this panel's next k slot, written later
        else _mm512_mask_storeu_ps(d, 0x3FFF, v);
      }
    }
    return;
  }
  for (int64_t q = 0; q < np; ++q)
    pack_a_panel(ap + q * kc * kMr, a.at_block(q * kMr, 0), std::min(kMr, mc - q * kMr), kc);
}

void pack_a_krange_impl(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  const int64_t np = gemm::packed_a_panels(M);
  if (a.rs == 1) {  // each source row k holds A(0:M, k): copy 14-float pieces into every panel
    for (int64_t k = k0; k < k1; ++k) {
      const float* src = a.p + k * a.cs;
      for (int64_t q = 0; q < np; ++q) {
        const int64_t mr = std::min(kMr, M - q * kMr);
        _mm512_mask_storeu_ps(dst + q * K * kMr + k * kMr, 0x3FFF, _mm512_maskz_loadu_ps(tail(mr), src + q * kMr));
      }
    }
    return;
  }
  for (int64_t q = 0; q < np; ++q)
    pack_a_panel(dst + q * K * kMr + k0 * kMr, a.at_block(q * kMr, k0), std::min(kMr, M - q * kMr), k1 - k0);
}

void pack_b_impl(float* dst, View b, int64_t K, int64_t N, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q) {
    float* d = dst + q * K * kNr;
    const int64_t n0 = q * kNr, nr = std::min(kNr, N - n0);
    if (b.cs == 1) {  // row-major B: each k is a contiguous run of nr floats
      const __mmask16 m0 = tail(nr), m1 = tail(nr - 16);
      for (int64_t k = 0; k < K; ++k) {
        const float* s = b.p + k * b.rs + n0;
        _mm512_storeu_ps(d + k * kNr, _mm512_maskz_loadu_ps(m0, s));
        _mm512_storeu_ps(d + k * kNr + 16, _mm512_maskz_loadu_ps(m1, s + 16));
      }
    } else if (b.rs == 1) {  // B = Wᵀ with W row-major: transpose 16x16 blocks
      __m512 r[16];
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t nh = std::min<int64_t>(16, nr - half * 16);
        for (int64_t k = 0; k < K; k += 16) {
          const int64_t kk = std::min<int64_t>(16, K - k);
          const __mmask16 m = tail(kk);
          for (int64_t i = 0; i < 16; ++i)
            r[i] = i < nh ? _mm512_maskz_loadu_ps(m, b.p + (n0 + half * 16 + i) * b.cs + k) : _mm512_setzero_ps();
          transpose16(r);
          for (int64_t j = 0; j < kk; ++j) _mm512_storeu_ps(d + (k + j) * kNr + half * 16, r[j]);
        }
      }
    } else {
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < kNr; ++j) d[k * kNr + j] = j < nr ? b.at(k, n0 + j) : 0.0f;
    }
  }
}

// ---- micro-kernel ----
// C[0:MR, 0:nr] = [C +] sum_k ap[k, 0:MR] x bp[k, 0:32] (packed panels, rows kMr apart). cn: the C
// tile the next call will touch; its lines are prefetched for writing during the first k steps, so the stores
// (or loads) of the next tile do not stall on cache misses (prefetches never fault).
template <int MR>
void kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, int64_t nr,
            bool load_c, const float* cn) {
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
  int64_t k = 0;
  const int64_t kp = std::min<int64_t>(kc, MR);
  for (; k < kp; ++k) {
    __builtin_prefetch(cn + k * ldc, 1, 3);
    __builtin_prefetch(cn + k * ldc + 16, 1, 3);
    __builtin_prefetch(cn + k * ldc + 31, 1, 3);
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
    }
    ap += kMr;
    bp += kNr;
  }
  for (; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
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

using KernelFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool, const float*);
template <int... I>
constexpr auto make_kernels(std::integer_sequence<int, I...>) {
  return std::array<KernelFn, sizeof...(I)>{&kernel<I + 1>...};
}
constexpr auto kKernels = make_kernels(std::make_integer_sequence<int, kMr>{});

// 12 independent 16-lane FMA chains (enough to cover FMA latency x throughput on current cores).
double fma_probe_impl(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]), "+v"(acc[5]));
  }
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += hsum(acc[i]);
  __asm__ volatile("" ::"m"(sink));
  return 2.0 * 16 * 12 * static_cast<double>(iters);
}

// ---- bf16 pieces (kernels/gemm.h's rounding in integer lanes; kernels_impl.inc uses them) ----
// Each lane's bf16 (RNE, NaN quiet, zero/denormal to signed zero) in its high half, the low half zero.
inline __m512i round_bf16_hi(__m512i u) {
  const __m512i absu = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 tiny =
      _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7F800000)), _mm512_setzero_si512());
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(absu, _mm512_set1_epi32(0x7F800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(u, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
}
// VCVTNE2PS2BF16 where the CPU has it (the rounding above in one instruction: the tests check they agree bit for
// bit), used when the VDPBF16PS micro-kernels are active; only these functions are compiled for AVX512_BF16.
#define PG_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,bmi2")))
// bf16 of b in words 0-15 and of a in words 16-31 (_mm512_cvtne2ps_pbh(a, b)).
PG_BF16_TARGET __attribute__((always_inline)) inline __m512i cvt2(__m512 a, __m512 b) {
  return (__m512i)_mm512_cvtne2ps_pbh(a, b);
}
// VPERMW index: words 0-15 and 16-31 of cvt2(odd, even) interleaved, even first (one pair word per lane).
alignas(64) inline constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                         8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
// pair_rows (below) with VCVTNE2PS2BF16: the two k rows of a pair converted in one instruction (bf16 of the even row in
// words 0-15, of the odd row in 16-31) and interleaved by one VPERMW; index and masks loaded once per panel.
PG_BF16_TARGET void pair_rows_cvt(uint32_t* dst, int64_t dstride, const float* src, int64_t srs, int64_t n,
                                  int64_t width, int64_t kc) {
  const __m512i idx = _mm512_load_si512(kInterleave);
  const int64_t full = kc / 2;  // pairs with both k rows
  for (int64_t j = 0; j < width; j += 16) {
    const __mmask16 m = tail(n - j), st = tail(width - j);
    const float* s = src + j;
    uint32_t* d = dst + j;
    for (int64_t p = 0; p < full; ++p, s += 2 * srs, d += dstride) {
      const __m512 e = _mm512_maskz_loadu_ps(m, s), o = _mm512_maskz_loadu_ps(m, s + srs);
      _mm512_mask_storeu_epi32(d, st, _mm512_permutexvar_epi16(idx, cvt2(o, e)));
    }
    if (kc % 2)
      _mm512_mask_storeu_epi32(d, st,
                               _mm512_permutexvar_epi16(idx, cvt2(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, s))));
  }
}
// Pair rows of every panel (w columns each: kMr for A, kNr for B) of n columns of src (rows srs floats apart, kc
// rows): panel q's pair p at dst + q * pstride + p * w (zero past column n), as pair_rows_cvt per panel, but pair by
// pair across all panels, so each source row is read once, front to back, and the rows some pairs ahead are
// prefetched.
PG_BF16_TARGET void pair_panels_cvt(uint32_t* dst, int64_t pstride, int64_t w, const float* src, int64_t srs, int64_t n,
                                    int64_t kc) {
  constexpr int64_t kAhead = 8;  // rows
  const __m512i idx = _mm512_load_si512(kInterleave);
  for (int64_t p = 0; p < (kc + 1) / 2; ++p) {
    const float* e = src + 2 * p * srs;
    const float* o = e + srs;
    const bool odd = 2 * p + 1 < kc;
    if (2 * p + kAhead + 1 < kc)
      for (int64_t l = 0; l < n; l += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(e + kAhead * srs + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(o + kAhead * srs + l), _MM_HINT_T0);
      }
    for (int64_t q = 0, c0 = 0; c0 < n; ++q, c0 += w) {
      const int64_t cnt = std::min(w, n - c0);
      for (int64_t j = 0; j < w; j += 16) {
        const __mmask16 m = tail(cnt - j);
        const __m512 ev = _mm512_maskz_loadu_ps(m, e + c0 + j);
        const __m512 ov = odd ? _mm512_maskz_loadu_ps(m, o + c0 + j) : _mm512_setzero_ps();
        _mm512_mask_storeu_epi32(dst + q * pstride + p * w + j, tail(w - j),
                                 _mm512_permutexvar_epi16(idx, cvt2(ov, ev)));
      }
    }
  }
}
// dst[j] = bf16(even[j]) | bf16(odd[j]) << 16 for j < n (odd == nullptr: zero), dst[j] = 0 for n <= j < width.
void convert_pairs_int(uint32_t* dst, const float* even, const float* odd, int64_t n, int64_t width) {
  for (int64_t j = 0; j < width; j += 16) {
    const __mmask16 m = tail(n - j);
    const __m512i e = round_bf16_hi(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, even + j)));
    const __m512i o =
        odd ? round_bf16_hi(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, odd + j))) : _mm512_setzero_si512();
    _mm512_mask_storeu_epi32(dst + j, tail(width - j), _mm512_or_si512(_mm512_srli_epi32(e, 16), o));
  }
}
// 32 consecutive floats (lo: k 0..15, hi: k 16..31) to 16 bf16 pair words, rounded in software (the integer twin of
// cvt2(hi, lo)): round each lane, keep its high 16 bits (one VPERMT2W over both halves).
inline __m512i round_pairs_int(__m512 lo, __m512 hi) {
  alignas(64) static constexpr uint16_t kOddHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                          23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                          45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(round_bf16_hi(_mm512_castps_si512(lo)), _mm512_load_si512(kOddHalves),
                                   round_bf16_hi(_mm512_castps_si512(hi)));
}
// Rows i < nrows (<= 16) of src (row stride rs, contiguous along k) to pair rows: dst[p * dstride + i] = the words of
// (src[i][2p], src[i][2p+1]) for p < (kc+1)/2, `width` words per pair row (rows >= nrows zero). 32 k of 16 rows at a
// time: round, keep the high 16 bits of every lane (one VPERMT2W), then a 16x16 transpose of the words.
bool rows_to_pairs_int(uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows, int64_t kc,
                       int64_t width) {
  const __mmask16 st = tail(width);
  __m512 r[16];
  for (int64_t k = 0; k < kc; k += 32) {
    const int64_t kk = std::min<int64_t>(32, kc - k);
    const __mmask16 m0 = tail(kk), m1 = tail(kk - 16);
    for (int64_t i = 0; i < 16; ++i) {
      if (i < nrows) {
        const float* s = src + i * rs + k;
        r[i] = _mm512_castsi512_ps(round_pairs_int(_mm512_maskz_loadu_ps(m0, s), _mm512_maskz_loadu_ps(m1, s + 16)));
      } else {
        r[i] = _mm512_setzero_ps();
      }
    }
    transpose16(r);
    for (int64_t p = 0; p < (kk + 1) / 2; ++p)
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (k / 2 + p) * dstride), st, r[p]);
  }
  return true;
}
// rows_to_pairs_int with VCVTNE2PS2BF16: words 0-15 from k..k+15, 16-31 from k+16..k+31, so lane m already holds
// the pair (k+2m, k+2m+1).
PG_BF16_TARGET bool rows_to_pairs_cvt(uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows,
                                      int64_t kc, int64_t width) {
  const __mmask16 st = tail(width);
  __m512 r[16];
  for (int64_t k = 0; k < kc; k += 32) {
    const int64_t kk = std::min<int64_t>(32, kc - k);
    const __mmask16 m0 = tail(kk), m1 = tail(kk - 16);
    for (int64_t i = 0; i < 16; ++i) {
      const float* s = src + i * rs + k;
      if (i < nrows) {  // the same k of the next panel's rows (the caller's next call, usually)
        _mm_prefetch(reinterpret_cast<const char*>(s + nrows * rs), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(s + nrows * rs + 16), _MM_HINT_T1);
      }
      r[i] = i < nrows ? (__m512)cvt2(_mm512_maskz_loadu_ps(m1, s + 16), _mm512_maskz_loadu_ps(m0, s))
                       : _mm512_setzero_ps();
    }
    transpose16(r);
    for (int64_t p = 0; p < (kk + 1) / 2; ++p)
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (k / 2 + p) * dstride), st, r[p]);
  }
  return true;
}
// Whether the packers use VCVTNE2PS2BF16: with the VDPBF16PS micro-kernels (so PAGEGRAM_BF16=emulated checks the
// integer rounding on the same machine).
inline bool bf16_cvt() { return native_bf16() != nullptr && !active_bf16().mxcsr_daz_ftz; }
void pair_rows(bool cvt, uint32_t* dst, int64_t dstride, const float* src, int64_t srs, int64_t n, int64_t width,
               int64_t kc) {
  if (cvt) return pair_rows_cvt(dst, dstride, src, srs, n, width, kc);
  for (int64_t p = 0; p < (kc + 1) / 2; ++p)
    convert_pairs_int(dst + p * dstride, src + 2 * p * srs, 2 * p + 1 < kc ? src + (2 * p + 1) * srs : nullptr, n,
                      width);
}
void pair_panels(bool cvt, uint32_t* dst, int64_t pstride, int64_t w, const float* src, int64_t srs, int64_t n,
                 int64_t kc) {
  if (cvt) return pair_panels_cvt(dst, pstride, w, src, srs, n, kc);
  for (int64_t q = 0; q * w < n; ++q)
    pair_rows(false, dst + q * pstride, w, src + q * w, srs, std::min(w, n - q * w), w, kc);
}
bool rows_to_pairs(bool cvt, uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows, int64_t kc,
                   int64_t width) {
  return cvt ? rows_to_pairs_cvt(dst, dstride, src, rs, nrows, kc, width)
             : rows_to_pairs_int(dst, dstride, src, rs, nrows, kc, width);
}
// Rows r < nrows of src (row stride rs, contiguous along k) to bf16 words in place order: dst[r * dstride + p] = the
// word of (src[r][2p], src[r][2p+1]) for p < (kc+1)/2 (the kr micro-kernels' row layout); the rows two ahead are
// prefetched.
template <bool Cvt>
PG_BF16_TARGET void rows_to_bf16_impl(uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows,
                                      int64_t kc) {
  const int64_t nw = (kc + 1) / 2;
  for (int64_t r = 0; r < nrows; ++r) {
    const float* s = src + r * rs;
    uint32_t* d = dst + r * dstride;
    if (r + 2 < nrows)
      for (int64_t l = 0; l < kc; l += 16) _mm_prefetch(reinterpret_cast<const char*>(s + 2 * rs + l), _MM_HINT_T0);
    for (int64_t k = 0; k < kc; k += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(tail(kc - k), s + k),
                   hi = _mm512_maskz_loadu_ps(tail(kc - k - 16), s + k + 16);
      __m512i w;
      if constexpr (Cvt) w = cvt2(hi, lo);
      else w = round_pairs_int(lo, hi);
      _mm512_mask_storeu_epi32(d + k / 2, tail(nw - k / 2), w);
    }
  }
}
void rows_to_bf16(bool cvt, uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows, int64_t kc) {
  if (cvt) rows_to_bf16_impl<true>(dst, dstride, src, rs, nrows, kc);
  else rows_to_bf16_impl<false>(dst, dstride, src, rs, nrows, kc);
}
inline void split16(const uint32_t* p, V& even, V& odd) {
  const __m512i w = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

#include "kernels/kernels_impl.inc"

}  // namespace

const Kernels& table() {
  static const Kernels k = make_table(isa::Isa::avx512);
  return k;
}

}  // namespace pg::kern::avx512_impl

namespace pg::kern {
const Kernels& avx512_kernels() { return avx512_impl::table(); }
}  // namespace pg::kern
