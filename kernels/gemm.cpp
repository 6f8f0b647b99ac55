// Implementation of kernels/gemm.h: the float path hands packing and the blocked product to the active kernel
// table (kernels/kernels.h); the double path uses Eigen.
#include "kernels/gemm.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "kernels/kernels.h"

namespace pg::gemm {
namespace {

Precision g_precision = Precision::fp32;
bool bf16() { return g_precision == Precision::bf16; }

// A bf16 product over [k0, k0+K) of an operand packed for k_cap: whole pairs only (see PackedA/PackedB).
void check_pairs(int64_t k0, int64_t K, int64_t k_cap) {
  PG_CHECK(k0 % 2 == 0 && (K % 2 == 0 || k0 + K == k_cap), "bf16 GEMM over k [", k0, ", ", k0 + K,
           ") of an operand packed for ", k_cap, " splits a k pair");
}

using EStride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using EMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major; strides given explicitly

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

bool trivial(int64_t M, int64_t N, int64_t K, float* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::memset(c + i * ldc, 0, N * sizeof(float));
    return true;
  }
  return false;
}

// C = [C +] A[:, ka0 :] * B[kb0 :, n0 :] with the active kernels at the current precision.
void core(int64_t M, int64_t N, int64_t K, const kern::ASource& A, int64_t ka0, const float* bdata, int64_t b_kcap,
          int64_t kb0, int64_t n0, float* c, int64_t ldc, bool accumulate, float* abuf) {
  const kern::Kernels& kt = kern::active();
  if (!bf16()) {
    kt.gemm_core(M, N, K, A, ka0, bdata, b_kcap, kb0, n0, c, ldc, accumulate, abuf);
    return;
  }
  check_pairs(kb0, K, b_kcap);
  if (A.packed) check_pairs(ka0, K, A.k_cap);
  const kern::Bf16Micro& micro = kern::active_bf16();
  if (micro.core) micro.core(M, N, K, A, ka0, bdata, b_kcap, kb0, n0, c, ldc, accumulate, abuf);
  else kt.gemm_core16(M, N, K, A, ka0, bdata, b_kcap, kb0, n0, c, ldc, accumulate, abuf, micro);
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }
Precision precision() { return g_precision; }
void set_precision(Precision p) { g_precision = p; }

void gemm_bf16_reference(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  // DAZ on the accumulator read, FTZ on every FMA result (VDPBF16PS); the operands' denormals are already zero.
  auto flush = [](float x) { return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x; };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = accumulate ? flush(c[i * ldc + j]) : 0.0f;
      for (int64_t k = 0; k < K; k += 2) {
        const float ao = k + 1 < K ? from_bf16(to_bf16(a.at(i, k + 1))) : 0.0f;
        const float bo = k + 1 < K ? from_bf16(to_bf16(b.at(k + 1, j))) : 0.0f;
        acc = flush(std::fma(ao, bo, acc));
        acc = flush(std::fma(from_bf16(to_bf16(a.at(i, k))), from_bf16(to_bf16(b.at(k, j))), acc));
      }
      c[i * ldc + j] = acc;
    }
}

void gemm_bf16_amx_reference(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  auto flush = [](float x) { return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x; };
  auto bf = [](float x) { return from_bf16(to_bf16(x)); };
  const int64_t kp = (K + 1) / 2;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = accumulate ? c[i * ldc + j] : 0.0f;
      for (int64_t g = 0; g < kp; g += 16) {  // one tile product: 16 pairs, the last completed with zero pairs
        float e = 0.0f, o = 0.0f;
        for (int64_t p = g; p < g + 16; ++p) {
          const bool in = p < kp, odd = 2 * p + 1 < K;
          e = flush(std::fma(in ? bf(a.at(i, 2 * p)) : 0.0f, in ? bf(b.at(2 * p, j)) : 0.0f, e));
          o = flush(std::fma(in && odd ? bf(a.at(i, 2 * p + 1)) : 0.0f, in && odd ? bf(b.at(2 * p + 1, j)) : 0.0f, o));
        }
        acc = flush(flush(acc) + flush(e + o));
      }
      c[i * ldc + j] = acc;
    }
}

void pack_a(float* dst, View a, int64_t M, int64_t K, int64_t q0, int64_t q1) {
  if (bf16()) kern::active().pack_a16(dst, a, M, K, q0, q1);
  else kern::active().pack_a(dst, a, M, K, q0, q1);
}
void pack_a_krange(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  if (bf16()) {
    PG_CHECK(k0 % 2 == 0, "bf16 packing of A from an odd k ", k0);
    kern::active().pack_a_krange16(dst, a, M, K, k0, k1);
  } else {
    kern::active().pack_a_krange(dst, a, M, K, k0, k1);
  }
}
void pack_b(float* dst, View b, int64_t K, int64_t N, int64_t q0, int64_t q1) {
  if (bf16()) kern::active().pack_b16(dst, b, K, N, q0, q1);
  else kern::active().pack_b(dst, b, K, N, q0, q1);
}

void gemm_packed(int64_t M, int64_t N, int64_t K, View a, const PackedB& b, int64_t k0, int64_t n0, float* c,
                 int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  core(M, N, K, kern::ASource{a}, 0, b.data, b.k_cap, k0, n0, c, ldc, accumulate, thread_scratch(0, kMc * kKc));
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, const PackedB& b, int64_t k0,
                 int64_t n0, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  core(M, N, K, kern::ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, b.data, b.k_cap, k0, n0, c, ldc,
       accumulate, nullptr);
}

void gemm(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  pack_b(bp, b, K, N, 0, packed_b_panels(N));
  core(M, N, K, kern::ASource{a}, 0, bp, K, 0, 0, c, ldc, accumulate, thread_scratch(0, kMc * kKc));
}

void gemm(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, int64_t k0, View b, float* c, int64_t ldc,
          bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  pack_b(bp, b, K, N, 0, packed_b_panels(N));
  core(M, N, K, kern::ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, bp, K, 0, 0, c, ldc, accumulate, nullptr);
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
  if (bf16() && b.src.cs == 1 && b.K >= 256) {  // row-major B in bf16: k-ranges, each source row read once
    constexpr int64_t kBlock = 128;
    const int64_t nb = (b.K + kBlock - 1) / kBlock;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < nb; ++i)
      kern::active().pack_b_krange16(b.packed, b.src, b.K, b.N, i * kBlock, std::min(b.K, (i + 1) * kBlock));
    return;
  }
  const int64_t np = packed_b_panels(b.N);
#pragma omp for schedule(static)
  for (int64_t q = 0; q < np; ++q) pack_b(b.packed, b.src, b.K, b.N, q, q + 1);
}

void gemm(int64_t M, int64_t N, int64_t K, ViewD a, ViewD b, double* c, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  // Column-major maps: element (i, j) at p[i * inner + j * outer].
  Eigen::Map<const EMat<double>, 0, EStride> A(a.p, M, K, EStride(a.cs, a.rs));
  Eigen::Map<const EMat<double>, 0, EStride> B(b.p, K, N, EStride(b.cs, b.rs));
  Eigen::Map<EMat<double>, 0, EStride> C(c, M, N, EStride(1, ldc));
  if (accumulate) C.noalias() += A * B;
  else C.noalias() = A * B;
}

}  // namespace pg::gemm
