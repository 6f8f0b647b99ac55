// Vectorized element-wise math for the backbone: exp, erf-GELU, and fixed-order reductions (sum, dot, max).
// Float uses AVX-512 when compiled for it (masked tails, so every element goes through the same code and a
// result never depends on where a row starts); double (the gradient-check instantiation) uses <cmath>.
#pragma once
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#define PG_SIMD_AVX512 1
#else
#define PG_SIMD_AVX512 0
#endif

namespace pg::simd {

#if PG_SIMD_AVX512
inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// exp(x) for 16 floats: Cephes range reduction + degree-6 polynomial (as Eigen's pexp_float, ~1 ulp);
// exactly 0 below -87.33 (no denormals) and for -inf.
inline __m512 exp16(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.0f)), _mm512_set1_ps(88.7228f));
  const __m512 m = _mm512_roundscale_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(m, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(m, _mm512_set1_ps(2.12194440e-4f), r);
  const __m512 r2 = _mm512_mul_ps(r, r), r3 = _mm512_mul_ps(r2, r);
  __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500E-4f), r, _mm512_set1_ps(1.3981999507E-3f));
  __m512 y1 = _mm512_fmadd_ps(_mm512_set1_ps(4.1665795894E-2f), r, _mm512_set1_ps(1.6666665459E-1f));
  const __m512 y2 = _mm512_add_ps(r, _mm512_set1_ps(1.0f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073E-3f));
  y1 = _mm512_fmadd_ps(y1, r, _mm512_set1_ps(5.0000001201E-1f));
  y = _mm512_fmadd_ps(y, r3, y1);
  y = _mm512_fmadd_ps(y, r2, y2);
  const __m512 res = _mm512_scalef_ps(y, m);
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(under, res, _mm512_setzero_ps());
}

// erf(x) for 16 floats: the rational approximation Eigen uses for float (clamped to [-4, 4], a few ulp).
inline __m512 erf16(__m512 a) {
  const __m512 x = _mm512_max_ps(_mm512_min_ps(a, _mm512_set1_ps(4.0f)), _mm512_set1_ps(-4.0f));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.72614225801306e-10f), _mm512_set1_ps(2.77068142495902e-08f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.10102402082508e-06f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-5.69250639462346e-05f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-7.34990630326855e-04f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-2.95459980854025e-03f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.60960333262415e-02f));
  p = _mm512_mul_ps(x, p);
  __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(-1.45660718464996e-05f), _mm512_set1_ps(-2.13374055278905e-04f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.68282697438203e-03f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-7.37332916720468e-03f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.42647390514189e-02f));
  return _mm512_div_ps(p, q);
}

// Horizontal sum of 16 lanes in a fixed tree order.
inline float hsum16(__m512 v) {
  __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
#endif

// ---- scalar forms (double, and float without AVX-512) ----
inline double exp_s(double x) { return std::exp(x); }
inline float exp_s(float x) { return x < -87.33f ? 0.0f : std::exp(x); }
inline double erf_s(double x) { return std::erf(x); }
inline float erf_s(float x) { return std::erf(x); }

// out[i] = exp(in[i]) (in == out allowed).
template <class T>
inline void vexp(T* out, const T* in, int64_t n) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      _mm512_mask_storeu_ps(out + i, m, exp16(_mm512_maskz_loadu_ps(m, in + i)));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = exp_s(in[i]);
}

// x[i] = exp(x[i] - shift); returns the sum of the new x (16-lane partial sums, fixed order).
template <class T>
inline T exp_shift_sum(T* x, int64_t n, T shift) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    const __m512 sh = _mm512_set1_ps(shift);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh));
      _mm512_mask_storeu_ps(x + i, m, e);
      acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    }
    return hsum16(acc);
  }
#endif
  T s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = exp_s(static_cast<T>(x[i] - shift));
    s += x[i];
  }
  return s;
}

// x[j] = exp(scale * x[j] - shift[j]) for j < n; if sum: sum[j] += the new x[j]. (Attention softmax rows.)
template <class T>
inline void exp_affine_row(T* x, const T* shift, T scale, T* sum, int64_t n) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    const __m512 sc = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      const __m512 e = exp16(_mm512_fmsub_ps(sc, _mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, shift + j)));
      _mm512_mask_storeu_ps(x + j, m, e);
      if (sum) _mm512_mask_storeu_ps(sum + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, sum + j), e));
    }
    return;
  }
#endif
  for (int64_t j = 0; j < n; ++j) {
    x[j] = exp_s(static_cast<T>(scale * x[j] - shift[j]));
    if (sum) sum[j] += x[j];
  }
}

template <class T>
inline T vmax(const T* x, int64_t n) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    __m512 acc = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      acc = _mm512_mask_max_ps(acc, m, acc, _mm512_maskz_loadu_ps(m, x + i));
    }
    return _mm512_reduce_max_ps(acc);
  }
#endif
  T r = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

template <class T>
inline T vdot(const T* a, const T* b, int64_t n) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return hsum16(acc);
  }
#endif
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// GELU, exact erf form: out = 0.5 x (1 + erf(x / sqrt 2)).
template <class T>
inline void gelu_forward_row(T* out, const T* x, int64_t n) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), rs2 = _mm512_set1_ps(0.70710678118654752f);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
      const __m512 e = erf16(_mm512_mul_ps(v, rs2));
      _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e)));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = T(0.5) * x[i] * (T(1) + erf_s(static_cast<T>(x[i] * T(0.70710678118654752440))));
}

// dinp (+)= dout * gelu'(x), gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
template <class T>
inline void gelu_backward_row(T* dinp, const T* x, const T* dout, int64_t n, bool accumulate = true) {
#if PG_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), rs2 = _mm512_set1_ps(0.70710678118654752f);
    const __m512 c = _mm512_set1_ps(0.39894228040143268f), mhalf = _mm512_set1_ps(-0.5f);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
      const __m512 cdf = _mm512_mul_ps(half, _mm512_add_ps(one, erf16(_mm512_mul_ps(v, rs2))));
      const __m512 pdf = _mm512_mul_ps(c, exp16(_mm512_mul_ps(mhalf, _mm512_mul_ps(v, v))));
      const __m512 g = _mm512_fmadd_ps(v, pdf, cdf);
      const __m512 prev = accumulate ? _mm512_maskz_loadu_ps(m, dinp + i) : _mm512_setzero_ps();
      const __m512 d = _mm512_fmadd_ps(g, _mm512_maskz_loadu_ps(m, dout + i), prev);
      _mm512_mask_storeu_ps(dinp + i, m, d);
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T cdf = T(0.5) * (T(1) + erf_s(static_cast<T>(v * T(0.70710678118654752440))));
    const T pdf = T(0.39894228040143267794) * exp_s(static_cast<T>(T(-0.5) * v * v));
    dinp[i] = (accumulate ? dinp[i] : T(0)) + (cdf + v * pdf) * dout[i];
  }
}

}  // namespace pg::simd
#pragma GCC diagnostic pop
