// Implementation of core/gemm.h: the float path hands packing and the blocked product to the active kernel
// table (core/kernels.h); the double path uses Eigen.
#include "core/gemm.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/kernels.h"

namespace pg::gemm {
namespace {

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

}  // namespace

void pack_a(float* dst, View a, int64_t M, int64_t K, int64_t q0, int64_t q1) {
  kern::active().pack_a(dst, a, M, K, q0, q1);
}
void pack_a_krange(float* dst, View a, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  kern::active().pack_a_krange(dst, a, M, K, k0, k1);
}
void pack_b(float* dst, View b, int64_t K, int64_t N, int64_t q0, int64_t q1) {
  kern::active().pack_b(dst, b, K, N, q0, q1);
}

void gemm_packed(int64_t M, int64_t N, int64_t K, View a, const PackedB& b, int64_t k0, int64_t n0, float* c,
                 int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  kern::active().gemm_core(M, N, K, kern::ASource{a}, 0, b.data, b.k_cap, k0, n0, c, ldc, accumulate,
                           thread_scratch(0, kMc * kKc));
}

void gemm_packed(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, const PackedB& b, int64_t k0,
                 int64_t n0, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  kern::active().gemm_core(M, N, K, kern::ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, b.data, b.k_cap,
                           k0, n0, c, ldc, accumulate, nullptr);
}

void gemm(int64_t M, int64_t N, int64_t K, View a, View b, float* c, int64_t ldc, bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  const kern::Kernels& kt = kern::active();
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  kt.pack_b(bp, b, K, N, 0, packed_b_panels(N));
  kt.gemm_core(M, N, K, kern::ASource{a}, 0, bp, K, 0, 0, c, ldc, accumulate, thread_scratch(0, kMc * kKc));
}

void gemm(int64_t M, int64_t N, int64_t K, const PackedA& a, int64_t i0, int64_t k0, View b, float* c, int64_t ldc,
          bool accumulate) {
  if (trivial(M, N, K, c, ldc, accumulate)) return;
  const kern::Kernels& kt = kern::active();
  float* bp = thread_scratch(1, packed_b_floats(K, N));
  kt.pack_b(bp, b, K, N, 0, packed_b_panels(N));
  kt.gemm_core(M, N, K, kern::ASource{View{nullptr, 0, 0}, a.data, a.k_cap, i0}, k0, bp, K, 0, 0, c, ldc, accumulate,
               nullptr);
}

void pack_operand(const AOperand<float>& a) {
  constexpr int64_t kBlock = 128;
  const int64_t nb = (a.K + kBlock - 1) / kBlock;
#pragma omp for schedule(static)
  for (int64_t b = 0; b < nb; ++b) pack_a_krange(a.packed, a.src, a.M, a.K, b * kBlock, std::min(a.K, (b + 1) * kBlock));
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
  // Column-major maps: element (i, j) at p[i * inner + j * outer].
  Eigen::Map<const EMat<double>, 0, EStride> A(a.p, M, K, EStride(a.cs, a.rs));
  Eigen::Map<const EMat<double>, 0, EStride> B(b.p, K, N, EStride(b.cs, b.rs));
  Eigen::Map<EMat<double>, 0, EStride> C(c, M, N, EStride(1, ldc));
  if (accumulate)
    C.noalias() += A * B;
  else
    C.noalias() = A * B;
}

}  // namespace pg::gemm
