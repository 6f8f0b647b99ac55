// Vectorized element-wise math for the backbone: exp, erf-GELU, and fixed-order reductions (sum, dot, max).
// Float goes to the active kernel table (kernels/kernels.h: AVX-512 or AVX2, the same bits; masked tails, so every
// element goes through the same code and a result never depends on where a row starts); double (the
// gradient-check instantiation) uses <cmath>.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernels.h"

namespace pg::simd {

// ---- scalar forms (double; float only where a caller wants one element) ----
inline double exp_s(double x) { return std::exp(x); }
inline float exp_s(float x) { return x < -87.33f ? 0.0f : std::exp(x); }
inline double erf_s(double x) { return std::erf(x); }
inline float erf_s(float x) { return std::erf(x); }

// out[i] = exp(in[i]) (in == out allowed).
template <class T>
inline void vexp(T* out, const T* in, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    kern::active().vexp(out, in, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = exp_s(in[i]);
}

// x[i] = exp(x[i] - shift); returns the sum of the new x (16-lane partial sums, fixed order).
template <class T>
inline T exp_shift_sum(T* x, int64_t n, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    return kern::active().exp_shift_sum(x, n, shift);
  }
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
  if constexpr (std::is_same_v<T, float>) {
    kern::active().exp_affine_row(x, shift, scale, sum, n);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    x[j] = exp_s(static_cast<T>(scale * x[j] - shift[j]));
    if (sum) sum[j] += x[j];
  }
}

template <class T>
inline T vmax(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return kern::active().vmax(x, n);
  }
  T r = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

template <class T>
inline T vdot(const T* a, const T* b, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return kern::active().vdot(a, b, n);
  }
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// GELU, exact erf form: out = 0.5 x (1 + erf(x / sqrt 2)).
template <class T>
inline void gelu_forward_row(T* out, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    kern::active().gelu_forward_row(out, x, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = T(0.5) * x[i] * (T(1) + erf_s(static_cast<T>(x[i] * T(0.70710678118654752440))));
}

// dinp (+)= dout * gelu'(x), gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
template <class T>
inline void gelu_backward_row(T* dinp, const T* x, const T* dout, int64_t n, bool accumulate = true) {
  if constexpr (std::is_same_v<T, float>) {
    kern::active().gelu_backward_row(dinp, x, dout, n, accumulate);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T cdf = T(0.5) * (T(1) + erf_s(static_cast<T>(v * T(0.70710678118654752440))));
    const T pdf = T(0.39894228040143267794) * exp_s(static_cast<T>(T(-0.5) * v * v));
    dinp[i] = (accumulate ? dinp[i] : T(0)) + (cdf + v * pdf) * dout[i];
  }
}

}  // namespace pg::simd
