// Implementation of core/gemm.h: operand packing (with AVX-512 16x16 transposes for the strided sides)
// and the 14x32 broadcast-FMA micro-kernel. Without AVX-512 the float path falls back to Eigen.
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*) and Eigen.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "core/gemm.h"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#define PG_GEMM_AVX512 1
#else
#define PG_GEMM_AVX512 0
#endif

namespace pg::gemm {
namespace {

using EStride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using EMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major; strides given explicitly

template <class T>
void eigen_gemm(int64_t M, int64_t N, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
                int64_t bcs, T* c, int64_t ldc, bool accumulate) {
  // Column-major maps: element (i, j) at p[i * inner + j * outer].
  Eigen::Map<const EMat<T>, 0, EStride> A(a, M, K, EStride(acs, ars));
  Eigen::Map<const EMat<T>, 0, EStride> B(b, K, N, EStride(bcs, brs));
  Eigen::Map<EMat<T>, 0, EStride> C(c, M, N, EStride(1, ldc));
  if (accumulate)
    C.noalias() += A * B;
  else
    C.noalias() = A * B;
}

// K split into equal-ish blocks of at most kKc (a pure function of K: fixes the summation order).
int64_t k_block(int64_t K) {
  const int64_t nblk = (K + kKc - 1) / kKc;
  const int64_t kc = (K + nblk - 1) / nblk;
  return std::min<int64_t>(kKc, (kc + 7) / 8 * 8);
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
// Thread-local scratch, allocated once per thread at its first use and then reused.
float* thread_scratch(int which, size_t floats) {
  static thread_local std::unique_ptr<float[], AlignedFree> buf[2];
  static thread_local size_t cap[2] = {0, 0};
  if (cap[which] < floats) {
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    buf[which].reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    cap[which] = floats;
  }
  return buf[which].get();
}

#if PG_GEMM_AVX512
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

inline __mmask16 first_n(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1u);
}

// ap[k * kMr + i] = A(i, k) for i < mr, k < kc; lanes i >= mr are zero. Each k is written with a full 16-lane
// store whose two extra lanes the next k overwrites; only the last k uses a 14-lane masked store, so nothing
// outside the panel is touched.
void pack_a_panel(float* ap, View a, int64_t mr, int64_t kc) {
  if (a.rs == 1) {  // column-contiguous (A = Xᵀ): each k is one contiguous run of mr floats
    const __mmask16 m = first_n(mr);
    for (int64_t k = 0; k + 1 < kc; ++k) _mm512_storeu_ps(ap + k * kMr, _mm512_maskz_loadu_ps(m, a.p + k * a.cs));
    _mm512_mask_storeu_ps(ap + (kc - 1) * kMr, 0x3FFF, _mm512_maskz_loadu_ps(m, a.p + (kc - 1) * a.cs));
  } else if (a.cs == 1) {  // row-major: transpose 16-wide k strips
    __m512 r[16];
    for (int64_t k = 0; k < kc; k += 16) {
      const int64_t kk = std::min<int64_t>(16, kc - k);
      const __mmask16 m = first_n(kk);
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < mr ? _mm512_maskz_loadu_ps(m, a.p + i * a.rs + k) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t j = 0; j < kk; ++j) {
        if (k + j + 1 < kc)
          _mm512_storeu_ps(ap + (k + j) * kMr, r[j]);
        else
          _mm512_mask_storeu_ps(ap + (k + j) * kMr, 0x3FFF, r[j]);
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
        const __m512 v = _mm512_maskz_loadu_ps(first_n(std::min(kMr, mc - q * kMr)), src + q * kMr);
        float* d = ap + q * kc * kMr + k * kMr;
        if (k + 1 < kc)
          _mm512_storeu_ps(d, v);  // lanes 14, 15 land in this panel's next k slot, written later
        else
          _mm512_mask_storeu_ps(d, 0x3FFF, v);
      }
    }
    return;
  }
  for (int64_t q = 0; q < np; ++q)
    pack_a_panel(ap + q * kc * kMr, a.at_block(q * kMr, 0), std::min(kMr, mc - q * kMr), kc);
}

// C[0:MR, 0:nr] = [C +] sum_k ap[k, 0:MR] x bp[k, 0:32] (packed panels, rows kMr apart). cn: the C
// tile the next call will touch; its lines are prefetched for writing during the first k steps, so the stores
// (or loads) of the next tile do not stall on cache misses (prefetches never fault: rows of cn past the last
// row of C are harmless).
template <int MR>
void kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, int64_t nr,
            bool load_c, const float* cn) {
  const __mmask16 m0 = first_n(nr), m1 = first_n(nr - 16);
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

// Where the A operand comes from: a view packed block by block, or pre-packed panels (rows from i0).
struct ASource {
  View view{nullptr, 0, 0};
  const float* packed = nullptr;
  int64_t k_cap = 0, i0 = 0;
};

// C (M x N) = [C +] A[:, ka0 : ka0+K] * B[kb0 : kb0+K, n0 : n0+N] with B packed (panel stride b_kcap * kNr).
// Loops: k-blocks (fixed by K: the summation order), row blocks of kMc, column groups of kNc, 14-row panels,
// 32-column panels. With k outermost a C tile that fits in L2 stays there over the whole reduction, and a
// B block is reused by every row block.
void gemm_core(int64_t M, int64_t N, int64_t K, const ASource& A, int64_t ka0, const float* bdata, int64_t b_kcap,
               int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate) {
  const int64_t kc = k_block(K);
  float* abuf = A.packed ? nullptr : thread_scratch(0, kMc * kKc);
  for (int64_t kb = 0; kb < K; kb += kc) {
    const int64_t kcur = std::min(kc, K - kb);
    const bool load_c = accumulate || kb > 0;
    for (int64_t ic = 0; ic < M; ic += kMc) {
      const int64_t mc = std::min(kMc, M - ic);
      const float* ap;
      int64_t a_stride;  // floats between A micro-panels
      if (A.packed) {
        ap = A.packed + ((A.i0 + ic) / kMr) * A.k_cap * kMr + (ka0 + kb) * kMr;
        a_stride = A.k_cap * kMr;
      } else {
        pack_a_block(abuf, A.view.at_block(ic, ka0 + kb), mc, kcur);
        ap = abuf;
        a_stride = kcur * kMr;
      }
      for (int64_t jg = 0; jg < N; jg += kNc) {
        const int64_t ng = std::min(kNc, N - jg);
        for (int64_t ir = 0; ir < mc; ir += kMr) {
          const KernelFn fn = kKernels[std::min(kMr, mc - ir) - 1];
          const float* a_panel = ap + (ir / kMr) * a_stride;
          float* crow = c + (ic + ir) * ldc;
          for (int64_t jr = jg; jr < jg + ng; jr += kNr) {
            // the next tile: the next column panel, else the first panel of the next row panel (within the
            // row block; at its end the current tile, so the pointer never leaves C)
            const float* cn = jr + kNr < jg + ng ? crow + jr + kNr : ir + kMr < mc ? crow + kMr * ldc + jg : crow + jr;
            fn(kcur, a_panel, bdata + ((n0 + jr) / kNr) * b_kcap * kNr + (kb0 + kb) * kNr, crow + jr, ldc, N - jr,
               load_c, cn);
          }
        }
      }
    }
  }
}
#endif  // PG_GEMM_AVX512

}  // namespace

void pack_a(float* dst, View a, int64_t M, int64_t K, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t mr = std::min(kMr, M - q * kMr);
    float* d = dst + q * K * kMr;
#if PG_GEMM_AVX512
    pack_a_panel(d, a.at_block(q * kMr, 0), mr, K);
#else
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < kMr; ++i) d[k * kMr + i] = i < mr ? a.at(q * kMr + i, k) : 0.0f;
#endif
  }
}

void pack_a_krange(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  const int64_t np = packed_a_panels(M);
#if PG_GEMM_AVX512
  if (a.rs == 1) {  // each source row k holds A(0:M, k): copy 14-float pieces into every panel
    for (int64_t k = k0; k < k1; ++k) {
      const float* src = a.p + k * a.cs;
      for (int64_t q = 0; q < np; ++q) {
        const int64_t mr = std::min(kMr, M - q * kMr);
        _mm512_mask_storeu_ps(dst + q * K * kMr + k * kMr, 0x3FFF, _mm512_maskz_loadu_ps(first_n(mr), src + q * kMr));
      }
    }
    return;
  }
  for (int64_t q = 0; q < np; ++q)
    pack_a_panel(dst + q * K * kMr + k0 * kMr, a.at_block(q * kMr, k0), std::min(kMr, M - q * kMr), k1 - k0);
#else
  for (int64_t q = 0; q < np; ++q)
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t i = 0; i < kMr; ++i) dst[q * K * kMr + k * kMr + i] = q * kMr + i < M ? a.at(q * kMr + i, k) : 0.0f;
#endif
}

void pack_b(float* dst, View b, int64_t K, int64_t N, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q) {
    float* d = dst + q * K * kNr;
    const int64_t n0 = q * kNr, nr = std::min(kNr, N - n0);
#if PG_GEMM_AVX512
    if (b.cs == 1) {  // row-major B: each k is a contiguous run of nr floats
      const __mmask16 m0 = first_n(nr), m1 = first_n(nr - 16);
      for (int64_t k = 0; k < K; ++k) {
        const float* s = b.p + k * b.rs + n0;
        _mm512_storeu_ps(d + k * kNr, _mm512_maskz_loadu_ps(m0, s));
        _mm512_storeu_ps(d + k * kNr + 16, _mm512_maskz_loadu_ps(m1, s + 16));
      }
      continue;
    }
    if (b.rs == 1) {  // B = Wᵀ with W row-major: transpose 16x16 blocks
      __m512 r[16];
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t nh = std::min<int64_t>(16, nr - half * 16);
        for (int64_t k = 0; k < K; k += 16) {
          const int64_t kk = std::min<int64_t>(16, K - k);
          const __mmask16 m = first_n(kk);
          for (int64_t i = 0; i < 16; ++i)
            r[i] = i < nh ? _mm512_maskz_loadu_ps(m, b.p + (n0 + half * 16 + i) * b.cs + k) : _mm512_setzero_ps();
          transpose16(r);
          for (int64_t j = 0; j < kk; ++j) _mm512_storeu_ps(d + (k + j) * kNr + half * 16, r[j]);
        }
      }
      continue;
    }
#endif
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < kNr; ++j) d[k * kNr + j] = j < nr ? b.at(k, n0 + j) : 0.0f;
  }
}

namespace {
bool trivial(int64_t M, int64_t N, int64_t K, float* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::memset(c + i * ldc, 0, N * sizeof(float));
    return true;
  }
  return false;
}
#if !PG_GEMM_AVX512
// Portable path: unpack through strided views of the packed layouts and use Eigen.
void eigen_packed(int64_t M, int64_t N, int64_t K, View a, const PackedB& b, int64_t k0, int64_t n0, float* c,
                  int64_t ldc, bool accumulate) {
  for (int64_t q = 0; q * kNr < N; ++q) {
    const int64_t nq = std::min(kNr, N - q * kNr);
    const float* bp = b.data + ((n0 / kNr) + q) * b.k_cap * kNr + k0 * kNr;
    eigen_gemm<float>(M, nq, K, a.p, a.rs, a.cs, bp, kNr, 1, c + q * kNr, ldc, accumulate);
  }
}
View packed_a_view(const PackedA& a, int64_t panel, int64_t k0) {
  return View{a.data + panel * a.k_cap * kMr + k0 * kMr, 1, kMr};
}
#endif
}  // namespace

void gemm_packed(int64_t M, int64_t N, int64_t K, View a, const PackedB& b, int64_t k0, int64_t n0, float* c,
                 int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
#if PG_GEMM_AVX512
  gemm_core(M, N, K, ASource{a}, 0, b.data, b.k_cap, k0, n0, c, ldc, accumulate);
#else
  eigen_packed(M, N, K, a, b, k0, n0, c, ldc, accumulate);
#endif
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, const PackedB& b, int64_t k0,
                 int64_t n0, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
#if PG_GEMM_AVX512
  gemm_core(M, N, K, ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, b.data, b.k_cap, k0, n0, c, ldc,
            accumulate);
#else
  for (int64_t ir = 0; ir < M; ir += kMr)
    eigen_packed(std::min(kMr, M - ir), N, K, packed_a_view(a, (i0 + ir) / kMr, k0), b, k0, n0, c + ir * ldc, ldc,
                 accumulate);
#endif
}

void gemm(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
#if PG_GEMM_AVX512
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  pack_b(bp, b, K, N, 0, packed_b_panels(N));
  gemm_core(M, N, K, ASource{a}, 0, bp, K, 0, 0, c, ldc, accumulate);
#else
  eigen_gemm<float>(M, N, K, a.p, a.rs, a.cs, b.p, b.rs, b.cs, c, ldc, accumulate);
#endif
}

void gemm(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, int64_t k0, View b, float* c, int64_t ldc,
          bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
#if PG_GEMM_AVX512
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  pack_b(bp, b, K, N, 0, packed_b_panels(N));
  gemm_core(M, N, K, ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, bp, K, 0, 0, c, ldc, accumulate);
#else
  for (int64_t ir = 0; ir < M; ir += kMr) {
    const View av = packed_a_view(a, (i0 + ir) / kMr, k0);
    eigen_gemm<float>(std::min(kMr, M - ir), N, K, av.p, av.rs, av.cs, b.p, b.rs, b.cs, c + ir * ldc, ldc, accumulate);
  }
#endif
}

void pack_operand(const AOperand<float>& a) {
  constexpr int64_t kBlock = 128;
  const int64_t nb = (a.K + kBlock - 1) / kBlock;
#pragma omp for schedule(static)
  for (int64_t b = 0; b < nb; ++b)
    pack_a_krange(a.packed, a.src, a.M, a.K, b * kBlock, std::min(a.K, (b + 1) * kBlock));
}
void pack_operand_serial(const AOperand<float>& a) { pack_a(a.packed, a.src, a.M, a.K, 0, packed_a_panels(a.M)); }
void pack_operand_serial(const BOperand<float>& b) { pack_b(b.packed, b.src, b.K, b.N, 0, packed_b_panels(b.N)); }
void pack_operand(const BOperand<float>& b) {
  const int64_t np = packed_b_panels(b.N);
#pragma omp for schedule(static)
  for (int64_t q = 0; q < np; ++q) pack_b(b.packed, b.src, b.K, b.N, q, q + 1);
}

void gemm(int64_t M, int64_t N, int64_t K, ViewD a, ViewD b, double* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  eigen_gemm<double>(M, N, K, a.p, a.rs, a.cs, b.p, b.rs, b.cs, c, ldc, accumulate);
}

}  // namespace pg::gemm
