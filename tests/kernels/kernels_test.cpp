// The kernel tables of every instruction set this CPU runs (kernels/kernels.h) give the same bits: GEMM in every
// operand layout, with and without accumulation, pre-packed operands, partial tiles; element-wise math and
// reductions on every tail length and on the edges of exp's range. On an AVX2-only machine the AVX2 table is
// checked against a scalar model of the same operation order instead (fma chain per element).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/gemm.h"
#include "tests/test_util.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace pg {
namespace {

using gemm::View;

using testing::randn;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// C = [C +] A B through a kernel table (B packed whole, A packed block by block).
std::vector<float> run_gemm(const kern::Kernels& k, int64_t M, int64_t N, int64_t K, View a, View b,
                            const std::vector<float>& c0, bool acc) {
  std::vector<float> bp(gemm::packed_b_floats(K, N)), abuf(gemm::kMc * gemm::kKc), c = c0;
  k.pack_b(bp.data(), b, K, N, 0, gemm::packed_b_panels(N));
  k.gemm_core(M, N, K, kern::ASource{a}, 0, bp.data(), K, 0, 0, c.data(), N, acc, abuf.data());
  return c;
}

// The contract every table follows: c_ij = fma chain over k = 0..K-1 from C (or 0).
std::vector<float> fma_chain(int64_t M, int64_t N, int64_t K, View a, View b, const std::vector<float>& c0, bool acc) {
  std::vector<float> c(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = acc ? c0[i * N + j] : 0.0f;
      for (int64_t k = 0; k < K; ++k) s = std::fma(a.at(i, k), b.at(k, j), s);
      c[i * N + j] = s;
    }
  return c;
}

TEST(CoreKernels, EveryIsaComputesTheFmaChainOfEachGemmElement) {
  struct Shape {
    int64_t M, N, K;
  };
  const auto isas = isa::supported();
  ASSERT_FALSE(isas.empty()) << "the test machine lacks AVX2 + FMA";
  int cases = 0;
  for (Shape s :
       {Shape{1, 1, 1}, {3, 70, 33}, {14, 32, 16}, {15, 33, 17}, {13, 7, 5}, {29, 100, 385}, {170, 40, 800}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc) {
          auto A = randn(s.M * s.K, 11), B = randn(s.K * s.N, 12), C0 = randn(s.M * s.N, 13);
          const View a = ta ? View{A.data(), 1, s.M} : View{A.data(), s.K, 1};
          const View b = tb ? View{B.data(), 1, s.K} : View{B.data(), s.N, 1};
          const auto ref = fma_chain(s.M, s.N, s.K, a, b, C0, acc);
          for (isa::Isa i : isas) {
            const auto got = run_gemm(kern::kernels_for(i), s.M, s.N, s.K, a, b, C0, acc);
            EXPECT_TRUE(same_bits(got, ref)) << isa::name(i) << " M" << s.M << " N" << s.N << " K" << s.K << " ta" << ta
                                             << " tb" << tb << " acc" << acc;
            ++cases;
          }
        }
  }
  EXPECT_EQ(cases, 7 * 8 * static_cast<int>(isas.size()));
}

TEST(CoreKernels, PackedLayoutsAreTheSameInEveryIsa) {
  const int64_t M = 31, K = 45, N = 70;
  auto A = randn(M * K, 21), B = randn(K * N, 22);
  const auto isas = isa::supported();
  for (int t = 0; t < 2; ++t) {
    const View a = t ? View{A.data(), 1, M} : View{A.data(), K, 1};
    const View b = t ? View{B.data(), 1, K} : View{B.data(), N, 1};
    std::vector<std::vector<float>> pa, pk, pb;
    for (isa::Isa i : isas) {
      const auto& k = kern::kernels_for(i);
      std::vector<float> x(gemm::packed_a_floats(M, K), -1.0f), y(gemm::packed_a_floats(M, K), -1.0f),
          z(gemm::packed_b_floats(K, N), -1.0f);
      k.pack_a(x.data(), a, M, K, 0, gemm::packed_a_panels(M));
      k.pack_a_krange(y.data(), a, M, K, 0, 20);
      k.pack_a_krange(y.data(), a, M, K, 20, K);
      k.pack_b(z.data(), b, K, N, 0, gemm::packed_b_panels(N));
      // the documented layout: panel q, k, lane i (zero past the edge)
      for (int64_t q = 0; q < gemm::packed_a_panels(M); ++q)
        for (int64_t kk = 0; kk < K; ++kk)
          for (int64_t l = 0; l < gemm::kMr; ++l) {
            const float want = q * gemm::kMr + l < M ? a.at(q * gemm::kMr + l, kk) : 0.0f;
            ASSERT_EQ(x[(q * K + kk) * gemm::kMr + l], want) << isa::name(i);
            ASSERT_EQ(y[(q * K + kk) * gemm::kMr + l], want) << isa::name(i);
          }
      for (int64_t q = 0; q < gemm::packed_b_panels(N); ++q)
        for (int64_t kk = 0; kk < K; ++kk)
          for (int64_t l = 0; l < gemm::kNr; ++l)
            ASSERT_EQ(z[(q * K + kk) * gemm::kNr + l], q * gemm::kNr + l < N ? b.at(kk, q * gemm::kNr + l) : 0.0f)
                << isa::name(i);
    }
  }
}

TEST(CoreKernels, ElementwiseAndReductionsAgreeBitForBitAcrossIsas) {
  const auto isas = isa::supported();
  // exp's edges (underflow cut, overflow, scalef range), erf's clamp, signed zeros, every tail length
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.173f) x.push_back(v);
  for (float v : {-87.33f, -87.3299f, -87.34f, -88.0f, 88.72f, 88.7228f, 88.3f, 0.0f, -0.0f, 1e-30f, -1e-30f, 4.0f,
                  -4.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  auto r = randn(x.size(), 31);
  std::vector<std::vector<float>> outs(isas.size());
  for (size_t t = 0; t < isas.size(); ++t) {
    const auto& k = kern::kernels_for(isas[t]);
    auto& o = outs[t];
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{15}, int64_t{16}, int64_t{17},
                      int64_t{31}, static_cast<int64_t>(x.size())}) {
      std::vector<float> e(n), g(n), d(n, 0.5f), sh(n), sum(n, 1.0f), y(x.begin(), x.begin() + n);
      k.vexp(e.data(), x.data(), n);
      k.gelu_forward_row(g.data(), x.data(), n);
      k.gelu_backward_row(d.data(), r.data(), x.data(), n, true);
      for (int64_t i = 0; i < n; ++i) sh[i] = 0.25f * r[i];
      std::vector<float> z(r.begin(), r.begin() + n);
      k.exp_affine_row(z.data(), sh.data(), 0.125f, sum.data(), n);
      std::vector<float> w(r.begin(), r.begin() + n);
      const float s = k.exp_shift_sum(w.data(), n, 0.75f);
      o.insert(o.end(), e.begin(), e.end());
      o.insert(o.end(), g.begin(), g.end());
      o.insert(o.end(), d.begin(), d.end());
      o.insert(o.end(), z.begin(), z.end());
      o.insert(o.end(), sum.begin(), sum.end());
      o.insert(o.end(), w.begin(), w.end());
      o.push_back(s);
      o.push_back(k.vdot(r.data(), x.data() + 1, std::min<int64_t>(n, static_cast<int64_t>(x.size()) - 20)));
      o.push_back(k.vmax(r.data(), n));
    }
  }
  for (size_t t = 1; t < isas.size(); ++t)
    EXPECT_TRUE(same_bits(outs[t], outs[0])) << isa::name(isas[t]) << " vs " << isa::name(isas[0]);
  // and on any machine: a few values against their definitions
  const auto& k = kern::active();
  std::vector<float> one{1.0f}, e(1);
  k.vexp(e.data(), one.data(), 1);
  EXPECT_NEAR(e[0], std::exp(1.0f), 1e-6f);
  std::vector<float> under{-87.5f}, u(1, 7.0f);
  k.vexp(u.data(), under.data(), 1);
  EXPECT_EQ(u[0], 0.0f);
}

TEST(CoreKernels, IsaNamesParseAndUnknownValuesAreRefusedWithAHint) {
  EXPECT_EQ(isa::parse("auto"), isa::best());
  EXPECT_EQ(isa::parse("avx2"), isa::Isa::avx2);
  try {
    isa::parse("sse9");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("PAGEGRAM_ISA=sse9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("avx2"), std::string::npos) << e.what();
  }
  if (!isa::cpu_supports(isa::Isa::avx512)) {
    EXPECT_THROW(isa::parse("avx512"), UserError);
  } else {
    EXPECT_EQ(isa::parse("avx512"), isa::Isa::avx512);
  }
  EXPECT_FALSE(isa::cpu_description().empty());
}

TEST(CoreKernels, SelectSwitchesTheActiveTable) {
  const isa::Isa before = kern::active_isa();
  for (isa::Isa i : isa::supported()) {
    kern::select(i);
    EXPECT_EQ(kern::active_isa(), i);
    EXPECT_STREQ(kern::active_name(), isa::name(i));
  }
  kern::select(before);
}

}  // namespace
}  // namespace pg
