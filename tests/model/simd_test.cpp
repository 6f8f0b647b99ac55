// GEMM engine and SIMD math against scalar double references (kernels/gemm.h, model/simd.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/gemm.h"
#include "tests/test_util.h"
#include "model/simd.h"

namespace pg {
namespace {

using gemm::View;

using testing::randn;

// C = A B with A (M x K), B (K x N) in the four layouts, against a double reference.
TEST(ModelGemm, MatchesReferenceForAllLayoutsAndEdgeShapes) {
  struct Shape {
    int64_t M, N, K;
  };
  double worst = 0;
  for (Shape s :
       {Shape{1, 1, 1}, {3, 70, 33}, {14, 32, 16}, {15, 33, 17}, {37, 45, 19}, {112, 96, 400}, {29, 513, 770}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc) {
          auto A = randn(s.M * s.K, 1), B = randn(s.K * s.N, 2), C0 = randn(s.M * s.N, 3);
          const View a = ta ? View{A.data(), 1, s.M} : View{A.data(), s.K, 1};
          const View b = tb ? View{B.data(), 1, s.K} : View{B.data(), s.N, 1};
          std::vector<float> C = C0;
          gemm::gemm(s.M, s.N, s.K, a, b, C.data(), s.N, acc);
          double err = 0;
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t j = 0; j < s.N; ++j) {
              double r = acc ? C0[i * s.N + j] : 0.0, mag = std::abs(r);
              for (int64_t k = 0; k < s.K; ++k) {
                r += double(a.at(i, k)) * double(b.at(k, j));
                mag += std::abs(double(a.at(i, k)) * double(b.at(k, j)));
              }
              err = std::max(err, std::abs(r - C[i * s.N + j]) / mag);
            }
          EXPECT_LT(err, 1e-6) << "M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta << " tb" << tb;
          worst = std::max(worst, err);
        }
  }
  std::printf("[gemm] max |error| / sum_k |a b| = %.3g\n", worst);
}

TEST(ModelGemm, PackedOperandWithOffsetsMatchesUnpacked) {
  const int64_t K = 300, N = 200, M = 50;
  auto B = randn(K * N, 4), A = randn(M * K, 5);
  std::vector<float> packed(gemm::packed_b_floats(K, N));
  const auto op = gemm::make_b(packed.data(), View{B.data(), N, 1}, K, N);
  gemm::pack_operand(op);
  // A block of B: rows [k0, k0 + 100), columns [n0, n0 + 70)
  const int64_t k0 = 37, n0 = 64, kk = 100, nn = 70;
  std::vector<float> c1(M * nn), c2(M * nn);
  gemm::gemm_b(M, nn, kk, View{A.data(), K, 1}, op, k0, n0, c1.data(), nn, false);
  gemm::gemm(M, nn, kk, View{A.data(), K, 1}, View{B.data() + k0 * N + n0, N, 1}, c2.data(), nn, false);
  // every element is one FMA chain over k (kernels/gemm.h): the packed and unpacked paths agree bit for bit
  auto expect_same = [&](const std::vector<float>& x, const std::vector<float>& y) { EXPECT_EQ(x, y); };
  expect_same(c1, c2);
  // A pre-packed as well: rows [14, 14 + 30) of A, same k range
  std::vector<float> pa(gemm::packed_a_floats(M, K));
  const auto aop = gemm::make_a(pa.data(), View{A.data(), K, 1}, M, K);
  gemm::pack_operand(aop);
  std::vector<float> c3(30 * nn), c4(30 * nn), c5(30 * nn);
  gemm::gemm_ab(30, nn, kk, aop, 14, op, k0, n0, c3.data(), nn, false);
  gemm::gemm(30, nn, kk, View{A.data() + 14 * K + k0, K, 1}, View{B.data() + k0 * N + n0, N, 1}, c4.data(), nn, false);
  gemm::gemm_a(30, nn, kk, aop, 14, k0, View{B.data() + k0 * N + n0, N, 1}, c5.data(), nn, false);
  expect_same(c3, c4);
  expect_same(c5, c4);
}

TEST(ModelSimd, ExpErfGeluMatchStd) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 88.0f; v += 0.0371f) x.push_back(v);
  x.push_back(-std::numeric_limits<float>::infinity());
  std::vector<float> e(x.size());
  simd::vexp(e.data(), x.data(), static_cast<int64_t>(x.size()));
  double rel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(double(x[i]));
    if (x[i] < -87.33f) {
      EXPECT_EQ(e[i], 0.0f) << x[i];
    } else {
      rel = std::max(rel, std::abs(e[i] - ref) / ref);
    }
  }
  std::printf("[simd] exp max relative error %.3g\n", rel);
  EXPECT_LT(rel, 3e-7);

  std::vector<float> g(2001), gd(2001), one(2001, 1.0f), d(2001, 0.0f);
  std::vector<float> xs(2001);
  for (int i = 0; i < 2001; ++i) xs[i] = -10.0f + 0.01f * i;
  simd::gelu_forward_row(g.data(), xs.data(), 2001);
  simd::gelu_backward_row(d.data(), xs.data(), one.data(), 2001);
  double ge = 0, de = 0;
  for (int i = 0; i < 2001; ++i) {
    const double v = xs[i];
    const double ref = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double dref = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    ge = std::max(ge, std::abs(g[i] - ref) / std::max(1.0, std::abs(ref)));
    de = std::max(de, std::abs(d[i] - dref));
  }
  std::printf("[simd] gelu max error %.3g, gelu' max error %.3g\n", ge, de);
  EXPECT_LT(ge, 1e-6);
  EXPECT_LT(de, 1e-6);
}

TEST(ModelSimd, ReductionsAreExactEnoughAndTailSafe) {
  for (int64_t n : {1, 15, 16, 17, 100, 1000}) {
    auto a = randn(n, 7), b = randn(n, 8);
    double dot = 0, sum = 0, mx = -1e30;
    for (int64_t i = 0; i < n; ++i) {
      dot += double(a[i]) * b[i];
      mx = std::max<double>(mx, a[i]);
    }
    EXPECT_NEAR(simd::vdot(a.data(), b.data(), n), dot, 1e-5 * std::sqrt(double(n)));
    EXPECT_EQ(simd::vmax(a.data(), n), float(mx));
    std::vector<float> e = a;
    const float s = simd::exp_shift_sum(e.data(), n, float(mx));
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(a[i]) - mx);
    EXPECT_NEAR(s, sum, 1e-5 * sum);
  }
}

}  // namespace
}  // namespace pg
