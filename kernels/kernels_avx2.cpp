// The AVX2 + FMA kernel table (kernels/kernels.h). The GEMM shares the packed layout of the AVX-512 table
// (14-row A panels, 32-column B panels); its micro-kernel covers a 14x32 tile as two 16-column halves, each in
// row chunks of at most 6 (14 = 5 + 5 + 4), so a chunk holds at most 12 ymm accumulators + 2 B vectors + 1
// broadcast in the 16 ymm registers. The k range is taken in sub-blocks of 128 so that the six passes over a
// sub-block find its A and B slices in L1. A 16-float vector is a pair of ymm (lanes 0-7, 8-15), so reductions
// keep the same 16 lane partials and the same final tree as the AVX-512 table: every result is the same bits.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/gemm.h"
#include "kernels/kernels.h"

#pragma GCC target("avx2,fma,bmi2")

namespace pg::kern::avx2_impl {
namespace {

using gemm::kMr;
using gemm::kNr;
using gemm::View;

// ---- 16-float vector as two ymm ----
struct V {
  __m256 lo, hi;
};
struct Mk {
  __m256i lo, hi;
};
// Lane mask with the first n (clamped to [0, 8]) lanes set.
inline __m256i mask8(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))), idx);
}
inline Mk tail(int64_t n) { return {mask8(n), mask8(n - 8)}; }
inline V load(const float* p, Mk m) { return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)}; }
inline void store(float* p, Mk m, V v) {
  _mm256_maskstore_ps(p, m.lo, v.lo);
  _mm256_maskstore_ps(p + 8, m.hi, v.hi);
}
inline V loadf(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void storef(float* p, V v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
inline V set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V div(V a, V b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V fmadd(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
inline V fmsub(V a, V b, V c) { return {_mm256_fmsub_ps(a.lo, b.lo, c.lo), _mm256_fmsub_ps(a.hi, b.hi, c.hi)}; }
inline V min_(V a, V b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline V max_(V a, V b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V floor_(V a) {
  return {_mm256_round_ps(a.lo, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
          _mm256_round_ps(a.hi, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
}
// y * 2^m for integral m in [-127, 128] (exp16's range), as VSCALEFPS computes it: 2^m = 2^m1 * 2^m2 with
// m1 = floor(m / 2); y * 2^m1 is exact (y is in [0.5, 2]), so the only rounding is that of the final
// product, the correctly rounded y * 2^m (also when it is subnormal or overflows).
inline __m256 scalef8(__m256 y, __m256 m) {
  const __m256i mi = _mm256_cvtps_epi32(m);
  const __m256i m1 = _mm256_srai_epi32(mi, 1), m2 = _mm256_sub_epi32(mi, m1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(m1, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(m2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
}
inline V scalef_(V y, V m) { return {scalef8(y.lo, m.lo), scalef8(y.hi, m.hi)}; }
inline V zero_where_lt(V res, V x, float thr) {
  const __m256 t = _mm256_set1_ps(thr), z = _mm256_setzero_ps();
  return {_mm256_blendv_ps(res.lo, z, _mm256_cmp_ps(x.lo, t, _CMP_LT_OQ)),
          _mm256_blendv_ps(res.hi, z, _mm256_cmp_ps(x.hi, t, _CMP_LT_OQ))};
}
inline V maskz(Mk m, V v) {
  return {_mm256_and_ps(_mm256_castsi256_ps(m.lo), v.lo), _mm256_and_ps(_mm256_castsi256_ps(m.hi), v.hi)};
}
inline V mask_max(V acc, Mk m, V x) {
  return {_mm256_blendv_ps(acc.lo, _mm256_max_ps(acc.lo, x.lo), _mm256_castsi256_ps(m.lo)),
          _mm256_blendv_ps(acc.hi, _mm256_max_ps(acc.hi, x.hi), _mm256_castsi256_ps(m.hi))};
}
// The AVX-512 table's trees (kernels_avx512.cpp) on the two halves.
inline float hsum(V v) {
  const __m256 a = _mm256_add_ps(v.lo, v.hi);
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
inline float hmax(V v) {
  const __m256 a = _mm256_max_ps(v.hi, v.lo);
  __m128 b = _mm_max_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  b = _mm_max_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(1, 0, 3, 2)));
  b = _mm_max_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(b);
}

// ---- packing ----
// In-place transpose of an 8x8 block held as 8 row vectors: afterwards r[j] holds column j.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// dst[0:6] = lanes 0-5 of v with two plain stores: a masked store (VMASKMOVPS) is microcoded and slow on AMD's
// Zen cores, and the packers below store 6 lanes for every k.
inline void store6(float* dst, __m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  _mm_storeu_ps(dst, lo);
  _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
}

// dst[0:14] = src[0:mr], zeros after (one k of an A panel from an M-contiguous source).
inline void copy14(float* dst, const float* src, int64_t mr) {
  _mm256_storeu_ps(dst, _mm256_maskload_ps(src, mask8(mr)));
  store6(dst + 8, _mm256_maskload_ps(src + 8, mask8(mr - 8)));
}

// ap[k * kMr + i] = A(i, k) for i < mr, k < kc; lanes i >= mr are zero.
void pack_a_panel(float* ap, View a, int64_t mr, int64_t kc) {
  if (a.rs == 1) {  // column-contiguous (A = Xᵀ): each k is one contiguous run of mr floats
    for (int64_t k = 0; k < kc; ++k) copy14(ap + k * kMr, a.p + k * a.cs, mr);
  } else if (a.cs == 1) {  // row-major: transpose 8x8 blocks (rows 0-7 and 8-13)
    __m256 r[8];
    for (int64_t k = 0; k < kc; k += 8) {
      const int64_t kk = std::min<int64_t>(8, kc - k);
      const __m256i m = mask8(kk);
      for (int64_t g = 0; g < 2; ++g) {
        for (int64_t i = 0; i < 8; ++i) {
          const int64_t row = g * 8 + i;
          r[i] = row >= mr ? _mm256_setzero_ps()
                 : kk == 8 ? _mm256_loadu_ps(a.p + row * a.rs + k)
                           : _mm256_maskload_ps(a.p + row * a.rs + k, m);
        }
        transpose8(r);
        if (g == 0)
          for (int64_t j = 0; j < kk; ++j) _mm256_storeu_ps(ap + (k + j) * kMr, r[j]);
        else
          for (int64_t j = 0; j < kk; ++j) store6(ap + (k + j) * kMr + 8, r[j]);
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < kMr; ++i) ap[k * kMr + i] = i < mr ? a.at(i, k) : 0.0f;
  }
}

void pack_a_block(float* ap, View a, int64_t mc, int64_t kc) {
  const int64_t np = (mc + kMr - 1) / kMr;
  if (a.rs == 1 && np > 1) {  // k outer: one streaming pass over the source rows
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t q = 0; q < np; ++q)
        copy14(ap + q * kc * kMr + k * kMr, a.p + k * a.cs + q * kMr, std::min(kMr, mc - q * kMr));
    return;
  }
  for (int64_t q = 0; q < np; ++q)
    pack_a_panel(ap + q * kc * kMr, a.at_block(q * kMr, 0), std::min(kMr, mc - q * kMr), kc);
}

void pack_a_krange_impl(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  const int64_t np = gemm::packed_a_panels(M);
  if (a.rs == 1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t q = 0; q < np; ++q)
        copy14(dst + q * K * kMr + k * kMr, a.p + k * a.cs + q * kMr, std::min(kMr, M - q * kMr));
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
      const __m256i m[4] = {mask8(nr), mask8(nr - 8), mask8(nr - 16), mask8(nr - 24)};
      for (int64_t k = 0; k < K; ++k) {
        const float* s = b.p + k * b.rs + n0;
        for (int g = 0; g < 4; ++g) _mm256_storeu_ps(d + k * kNr + 8 * g, _mm256_maskload_ps(s + 8 * g, m[g]));
      }
    } else if (b.rs == 1) {  // B = Wᵀ with W row-major: transpose 8x8 blocks
      __m256 r[8];
      for (int64_t g = 0; g < 4; ++g) {
        const int64_t ng = std::min<int64_t>(8, nr - g * 8);
        for (int64_t k = 0; k < K; k += 8) {
          const int64_t kk = std::min<int64_t>(8, K - k);
          const __m256i m = mask8(kk);
          for (int64_t i = 0; i < 8; ++i)
            r[i] = i < ng ? _mm256_maskload_ps(b.p + (n0 + g * 8 + i) * b.cs + k, m) : _mm256_setzero_ps();
          transpose8(r);
          for (int64_t j = 0; j < kk; ++j) _mm256_storeu_ps(d + (k + j) * kNr + g * 8, r[j]);
        }
      }
    } else {
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < kNr; ++j) d[k * kNr + j] = j < nr ? b.at(k, n0 + j) : 0.0f;
    }
  }
}

// ---- micro-kernel ----
// C[0:R, 0:16] (columns < nc stored) = [C +] sum_k ap[k, 0:R] x bp[k, 0:16]; ap rows kMr apart, bp rows kNr.
template <int R>
inline void chunk(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, int64_t nc,
                  bool load_c) {
  __m256 c0[R], c1[R];
  const bool full = nc >= 16;
  const __m256i m0 = mask8(nc), m1 = mask8(nc - 8);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    if (!load_c) {
      c0[i] = _mm256_setzero_ps();
      c1[i] = _mm256_setzero_ps();
    } else if (full) {
      c0[i] = _mm256_loadu_ps(c + i * ldc);
      c1[i] = _mm256_loadu_ps(c + i * ldc + 8);
    } else {
      c0[i] = _mm256_maskload_ps(c + i * ldc, m0);
      c1[i] = _mm256_maskload_ps(c + i * ldc + 8, m1);
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(ap + i);
      c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
    }
    ap += kMr;
    bp += kNr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    if (full) {
      _mm256_storeu_ps(c + i * ldc, c0[i]);
      _mm256_storeu_ps(c + i * ldc + 8, c1[i]);
    } else {
      _mm256_maskstore_ps(c + i * ldc, m0, c0[i]);
      _mm256_maskstore_ps(c + i * ldc + 8, m1, c1[i]);
    }
  }
}

// Rows [ROW, MR) of a 16-column half in chunks: n = ceil(MR / 6) chunks of near-equal size.
template <int MR, int CH = 0, int ROW = 0>
inline void chunks(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int64_t nc, bool load_c) {
  constexpr int n = (MR + 5) / 6;
  if constexpr (CH < n) {
    constexpr int R = MR / n + (CH < MR % n ? 1 : 0);
    chunk<R>(kc, ap + ROW, bp, c + ROW * ldc, ldc, nc, load_c);
    chunks<MR, CH + 1, ROW + R>(kc, ap, bp, c, ldc, nc, load_c);
  }
}

// The 14x32 tile contract of the AVX-512 kernel: C[0:MR, 0:nr] = [C +] A panel x B panel; cn: the next tile
// (prefetched for writing).
template <int MR>
void kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, int64_t nr,
            bool load_c, const float* cn) {
  for (int i = 0; i < MR; ++i) {
    __builtin_prefetch(cn + i * ldc, 1, 3);
    __builtin_prefetch(cn + i * ldc + 16, 1, 3);
    __builtin_prefetch(cn + i * ldc + 31, 1, 3);
  }
  // k in sub-blocks of kSubK: the six row-chunk passes over a sub-block then read its A and B slices (kSubK x 14
  // and kSubK x 32 floats, 23 KB) from L1 instead of streaming the whole k-block's panels (69 KB at kc 384) from L2
  // six times. C holds the exact fp32 partial between sub-blocks, so every element is the same FMA chain (same bits).
  constexpr int64_t kSubK = 128;
  for (int64_t k0 = 0; k0 < kc; k0 += kSubK) {
    const int64_t ks = std::min(kSubK, kc - k0);
    const bool ld = load_c || k0 > 0;
    chunks<MR>(ks, ap + k0 * kMr, bp + k0 * kNr, c, ldc, std::min<int64_t>(nr, 16), ld);
    if (nr > 16) chunks<MR>(ks, ap + k0 * kMr, bp + k0 * kNr + 16, c + 16, ldc, nr - 16, ld);
  }
}

using KernelFn = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool, const float*);
template <int... I>
constexpr auto make_kernels(std::integer_sequence<int, I...>) {
  return std::array<KernelFn, sizeof...(I)>{&kernel<I + 1>...};
}
constexpr auto kKernels = make_kernels(std::make_integer_sequence<int, kMr>{});

// 12 independent 8-lane FMA chains.
double fma_probe_impl(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]), "+x"(acc[4]), "+x"(acc[5]));
  }
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += hsum(V{acc[i], acc[i]});
  __asm__ volatile("" ::"m"(sink));
  return 2.0 * 8 * 12 * static_cast<double>(iters);
}

// ---- bf16 pieces (kernels/gemm.h's rounding in integer lanes; kernels_impl.inc uses them) ----
// Each lane's bf16 (RNE, NaN quiet, zero/denormal to signed zero) in its high half, the low half zero.
inline __m256i round_bf16_hi(__m256i u) {
  const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
  const __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7F800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
  r = _mm256_blendv_epi8(r, _mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0x80000000u))), tiny);
  return _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
}
// dst[j] = bf16(even[j]) | bf16(odd[j]) << 16 for j < n (odd == nullptr: zero), dst[j] = 0 for n <= j < width.
inline bool bf16_cvt() { return false; }  // no VCVTNE2PS2BF16 without AVX-512
void convert_pairs(bool, uint32_t* dst, const float* even, const float* odd, int64_t n, int64_t width) {
  for (int64_t j = 0; j < width; j += 8) {
    const __m256i m = mask8(n - j);
    const __m256i e = round_bf16_hi(_mm256_castps_si256(_mm256_maskload_ps(even + j, m)));
    const __m256i o = odd ? round_bf16_hi(_mm256_castps_si256(_mm256_maskload_ps(odd + j, m))) : _mm256_setzero_si256();
    _mm256_maskstore_epi32(reinterpret_cast<int*>(dst + j), mask8(width - j),
                           _mm256_or_si256(_mm256_srli_epi32(e, 16), o));
  }
}
void pair_rows(bool cvt, uint32_t* dst, int64_t dstride, const float* src, int64_t srs, int64_t n, int64_t width,
               int64_t kc) {
  for (int64_t p = 0; p < (kc + 1) / 2; ++p)
    convert_pairs(cvt, dst + p * dstride, src + 2 * p * srs, 2 * p + 1 < kc ? src + (2 * p + 1) * srs : nullptr, n,
                  width);
}
// Pair rows of every panel of w columns (see the AVX-512 file): panel by panel here.
void pair_panels(bool cvt, uint32_t* dst, int64_t pstride, int64_t w, const float* src, int64_t srs, int64_t n,
                 int64_t kc) {
  for (int64_t q = 0; q * w < n; ++q)
    pair_rows(cvt, dst + q * pstride, w, src + q * w, srs, std::min(w, n - q * w), w, kc);
}
// The transposing bf16 packer is left to the staged path on AVX2 (fp32 packer, then convert_pairs).
bool rows_to_pairs(bool, uint32_t*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t) { return false; }
// Rows r < nrows of src (row stride rs, contiguous along k) to bf16 words in place order: dst[r * dstride + p] = the
// word of (src[r][2p], src[r][2p+1]) for p < (kc+1)/2 (the kr micro-kernels' row layout).
void rows_to_bf16(bool, uint32_t* dst, int64_t dstride, const float* src, int64_t rs, int64_t nrows, int64_t kc) {
  const int64_t nw = (kc + 1) / 2;
  for (int64_t r = 0; r < nrows; ++r) {
    const float* s = src + r * rs;
    uint32_t* d = dst + r * dstride;
    for (int64_t k = 0; k < kc; k += 16) {
      const __m256i a =
          _mm256_srli_epi32(round_bf16_hi(_mm256_castps_si256(_mm256_maskload_ps(s + k, mask8(kc - k)))), 16);
      const __m256i b =
          _mm256_srli_epi32(round_bf16_hi(_mm256_castps_si256(_mm256_maskload_ps(s + k + 8, mask8(kc - k - 8)))), 16);
      // packus: [a0-3, b0-3, a4-7, b4-7] (values < 2^16, exact), then the 64-bit lanes in order
      const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
      _mm256_maskstore_epi32(reinterpret_cast<int*>(d + k / 2), mask8(nw - k / 2), w);
    }
  }
}
inline void split16(const uint32_t* p, V& even, V& odd) {
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  even = {_mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16))};
  odd = {_mm256_castsi256_ps(_mm256_and_si256(w0, hi)), _mm256_castsi256_ps(_mm256_and_si256(w1, hi))};
}

#include "kernels/kernels_impl.inc"

}  // namespace

const Kernels& table() {
  static const Kernels k = make_table(isa::Isa::avx2);
  return k;
}

}  // namespace pg::kern::avx2_impl

namespace pg::kern {
const Kernels& avx2_kernels() { return avx2_impl::table(); }
}  // namespace pg::kern
