// Every layer's backward against central finite differences in double (the same templated code the float
// training path uses), and the float instantiation against the double one (model/layers.h).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/gemm.h"
#include "model/layers.h"

namespace pg {
namespace {

using namespace layers;
using VecD = std::vector<double>;
using VecF = std::vector<float>;

VecD randn(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  VecD v(n);
  for (auto& x : v) x = d(g);
  return v;
}
VecF to_f(const VecD& v) { return VecF(v.begin(), v.end()); }
double dot(const VecD& a, const VecD& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss() w.r.t. x[i] for up to max_checks indices (evenly spread), compared with the
// analytic gradient g. Returns max |g - fd| / max |fd| (error relative to the gradient's scale).
double fd_check(const std::function<double()>& loss, double* x, const double* g, size_t n, size_t max_checks = 400,
                double h = 1e-5) {
  const size_t stride = std::max<size_t>(1, n / max_checks);
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < n; i += stride) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    err = std::max(err, std::abs(fd - g[i]));
    scale = std::max(scale, std::abs(fd));
  }
  return err / scale;
}
// max |a - b| / max |b|
template <class A, class B>
double rel_diff(const A& a, const B& b) {
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return err / scale;
}
void report(const char* what, double err) { std::printf("[fd] %-28s max rel error %.3g\n", what, err); }

// Finite differences call each layer thousands of times on tiny inputs: run them on one thread (the layers'
// results do not depend on the thread count; BitIdenticalAcrossThreadCounts in transformer_test.cpp checks it).
class ModelLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
  void TearDown() override { omp_set_num_threads(saved_); }
  int saved_ = 1;
};

constexpr double kTolD = 1e-6;  // double: finite differences vs analytic
constexpr double kTolF = 2e-5;  // float instantiation vs double

TEST_F(ModelLayers, Embedding) {
  const int64_t N = 9, C = 6, V = 11;
  std::vector<int32_t> tok = {3, 0, 10, 3, 7, 7, 7, 1, 3};
  VecD wte = randn(V * C, 1), R = randn(N * C, 2), out(N * C), dwte(V * C, 0.0);
  auto loss = [&] {
    embedding_forward(out.data(), tok.data(), wte.data(), N, C);
    return dot(out, R);
  };
  loss();
  embedding_backward(dwte.data(), R.data(), tok.data(), N, C);
  const double e = fd_check(loss, wte.data(), dwte.data(), wte.size());
  report("embedding dW", e);
  EXPECT_LT(e, kTolD);
}

TEST_F(ModelLayers, RmsNorm) {
  for (int64_t N : {5, 130}) {  // 130: three weight-gradient partial blocks
    const int64_t C = 12;
    VecD x = randn(N * C, 3), w = randn(C, 4, 0.3), R = randn(N * C, 5), out(N * C), rstd(N);
    for (auto& v : w) v += 1.0;
    VecD dx(N * C, 0.0), dw(C, 0.0), part(((N + kNormRows - 1) / kNormRows) * C);
    auto loss = [&] {
      rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6);
      return dot(out, R);
    };
    loss();
    rmsnorm_backward(dx.data(), dw.data(), part.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
    const double ex = fd_check(loss, x.data(), dx.data(), x.size()), ew = fd_check(loss, w.data(), dw.data(), C);
    report("rmsnorm dx", ex);
    report("rmsnorm dw", ew);
    EXPECT_LT(ex, kTolD);
    EXPECT_LT(ew, kTolD);

    // float vs double
    VecF xf = to_f(x), wf = to_f(w), Rf = to_f(R), of(N * C), rf(N), dxf(N * C, 0.f), dwf(C, 0.f), pf(part.size());
    rmsnorm_forward(of.data(), rf.data(), xf.data(), wf.data(), N, C, 1e-6f);
    rmsnorm_backward(dxf.data(), dwf.data(), pf.data(), Rf.data(), xf.data(), wf.data(), rf.data(), N, C);
    loss();
    EXPECT_LT(rel_diff(of, out), kTolF);
    EXPECT_LT(rel_diff(dxf, dx), kTolF);
    EXPECT_LT(rel_diff(dwf, dw), kTolF);
  }
}

TEST_F(ModelLayers, Linear) {
  const int64_t N = 130, C = 70, OC = 45;  // two token tasks; edges in every packing direction
  VecD x = randn(N * C, 6), W = randn(OC * C, 7, 0.2), res = randn(N * OC, 8), R = randn(N * OC, 9);
  VecD out(N * OC), dx(N * C, 0.0), dW(OC * C, 0.0);
  auto loss = [&] {
    linear_forward(out.data(), x.data(), W.data(), res.data(), N, C, OC, static_cast<double*>(nullptr));
    return dot(out, R);
  };
  loss();
  linear_backward(dx.data(), dW.data(), R.data(), x.data(), W.data(), N, C, OC, static_cast<double*>(nullptr),
                  static_cast<double*>(nullptr));
  const double ex = fd_check(loss, x.data(), dx.data(), x.size()), ew = fd_check(loss, W.data(), dW.data(), W.size());
  report("linear dx", ex);
  report("linear dW", ew);
  EXPECT_LT(ex, kTolD);
  EXPECT_LT(ew, kTolD);

  VecF xf = to_f(x), Wf = to_f(W), resf = to_f(res), Rf = to_f(R), of(N * OC), dxf(N * C, 0.f), dWf(OC * C, 0.f);
  VecF pw(std::max(gemm::packed_b_floats(C, OC), gemm::packed_b_floats(OC, C))), px(gemm::packed_b_floats(N, C));
  linear_forward(of.data(), xf.data(), Wf.data(), resf.data(), N, C, OC, pw.data());
  linear_backward(dxf.data(), dWf.data(), Rf.data(), xf.data(), Wf.data(), N, C, OC, pw.data(), px.data());
  loss();
  EXPECT_LT(rel_diff(of, out), kTolF);
  EXPECT_LT(rel_diff(dxf, dx), kTolF);
  EXPECT_LT(rel_diff(dWf, dW), kTolF);
  // accumulate = false overwrites dinp (same bits as adding into zeros), dW is still added to
  VecF dx2(N * C, 123.f), dW2 = dWf;
  linear_backward(dx2.data(), dW2.data(), Rf.data(), xf.data(), Wf.data(), N, C, OC, pw.data(), px.data(), false);
  EXPECT_EQ(dx2, dxf);
  for (size_t i = 0; i < dW2.size(); ++i) EXPECT_NEAR(dW2[i], 2 * dWf[i], 1e-5 * (1 + std::abs(dWf[i])));
}

TEST_F(ModelLayers, Rope) {
  const int64_t B = 2, T = 5, C = 8, NH = 2, HD = C / NH;
  VecD cs(T * HD / 2), sn(T * HD / 2);
  rope_tables(cs.data(), sn.data(), T, HD, 10000.0);
  VecD x = randn(B * T * 3 * C, 10), R = randn(B * T * 3 * C, 11), y;
  auto loss = [&] {
    y = x;
    rope_forward(y.data(), cs.data(), sn.data(), B, T, C, NH);
    return dot(y, R);
  };
  loss();
  // position 0 is the identity; v is untouched; rotations keep norms
  for (int64_t i = 0; i < 3 * C; ++i) EXPECT_EQ(y[i], x[i]);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t i = 2 * C; i < 3 * C; ++i) EXPECT_EQ(y[n * 3 * C + i], x[n * 3 * C + i]);
  EXPECT_NEAR(dot(y, y), dot(x, x), 1e-9);
  VecD dx = R;
  rope_backward(dx.data(), cs.data(), sn.data(), B, T, C, NH);
  const double e = fd_check(loss, x.data(), dx.data(), x.size());
  report("rope dx", e);
  EXPECT_LT(e, kTolD);
}

// Plain causal attention for one (b, h), double, as the forward reference.
VecD naive_attention(const VecD& qkv, int64_t B, int64_t T, int64_t C, int64_t NH) {
  const int64_t HD = C / NH;
  VecD out(B * T * C, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double m = -1e300, z = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int64_t i = 0; i < HD; ++i)
            d += qkv[(b * T + t) * 3 * C + h * HD + i] * qkv[(b * T + u) * 3 * C + C + h * HD + i];
          s[u] = d / std::sqrt(double(HD));
          m = std::max(m, s[u]);
        }
        for (int64_t u = 0; u <= t; ++u) z += std::exp(s[u] - m);
        for (int64_t u = 0; u <= t; ++u)
          for (int64_t i = 0; i < HD; ++i)
            out[(b * T + t) * C + h * HD + i] += std::exp(s[u] - m) / z * qkv[(b * T + u) * 3 * C + 2 * C + h * HD + i];
      }
  return out;
}

TEST_F(ModelLayers, Attention) {
  const int64_t B = 2, T = 70, C = 8, NH = 2;  // T = 70: a full and a partial query block
  VecD qkv = randn(B * T * 3 * C, 12), R = randn(B * T * C, 13), out(B * T * C), lse(B * NH * T);
  auto loss = [&] {
    attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  loss();
  EXPECT_LT(rel_diff(out, naive_attention(qkv, B, T, C, NH)), 1e-12);
  VecD dqkv(qkv.size(), 0.0);
  attention_backward(dqkv.data(), R.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  const double e = fd_check(loss, qkv.data(), dqkv.data(), qkv.size(), 600);
  report("attention dqkv", e);
  EXPECT_LT(e, kTolD);

  VecF qf = to_f(qkv), Rf = to_f(R), of(out.size()), lf(lse.size()), dqf(qkv.size(), 0.f);
  attention_forward(of.data(), lf.data(), qf.data(), B, T, C, NH);
  attention_backward(dqf.data(), Rf.data(), qf.data(), of.data(), lf.data(), B, T, C, NH);
  loss();
  EXPECT_LT(rel_diff(of, out), kTolF);
  EXPECT_LT(rel_diff(dqf, dqkv), kTolF);
  VecF dq2(qkv.size(), 7.f);
  attention_backward(dq2.data(), Rf.data(), qf.data(), of.data(), lf.data(), B, T, C, NH, false);
  EXPECT_EQ(dq2, dqf);
}

// attention_backward with the inverse RoPE fused in equals attention_backward followed by rope_backward.
TEST_F(ModelLayers, AttentionBackwardWithFusedRope) {
  const int64_t B = 2, T = 70, C = 16, NH = 2, HD = C / NH;
  VecD qkv = randn(B * T * 3 * C, 21), R = randn(B * T * C, 22), out(B * T * C), lse(B * NH * T);
  VecD cs(T * HD / 2), sn(T * HD / 2);
  rope_tables(cs.data(), sn.data(), T, HD, 10000.0);
  attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  VecD d1(qkv.size(), 0.0), d2(qkv.size(), 0.0);
  attention_backward(d1.data(), R.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH, false);
  rope_backward(d1.data(), cs.data(), sn.data(), B, T, C, NH);
  attention_backward(d2.data(), R.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH, false, cs.data(), sn.data());
  EXPECT_LT(rel_diff(d2, d1), 1e-14);
  VecF qf = to_f(qkv), Rf = to_f(R), of = to_f(out), lf = to_f(lse), csf = to_f(cs), snf = to_f(sn);
  VecF f1(qkv.size(), 0.f), f2(qkv.size(), 0.f);
  attention_backward(f1.data(), Rf.data(), qf.data(), of.data(), lf.data(), B, T, C, NH, false);
  rope_backward(f1.data(), csf.data(), snf.data(), B, T, C, NH);
  attention_backward(f2.data(), Rf.data(), qf.data(), of.data(), lf.data(), B, T, C, NH, false, csf.data(), snf.data());
  EXPECT_LT(rel_diff(f2, f1), 1e-6);
  EXPECT_LT(rel_diff(f2, d1), kTolF);
}

TEST_F(ModelLayers, AttentionWideHeadsFloat) {  // the head widths of the real shapes (32, 64), float vs double
  for (int64_t HD : {32, 64}) {
    const int64_t B = 1, T = 150, NH = 2, C = NH * HD;
    VecD qkv = randn(B * T * 3 * C, 14, 0.5), R = randn(B * T * C, 15), out(B * T * C), lse(B * NH * T);
    attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    VecD dqkv(qkv.size(), 0.0);
    attention_backward(dqkv.data(), R.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
    VecF qf = to_f(qkv), Rf = to_f(R), of(out.size()), lf(lse.size()), dqf(qkv.size(), 0.f);
    attention_forward(of.data(), lf.data(), qf.data(), B, T, C, NH);
    attention_backward(dqf.data(), Rf.data(), qf.data(), of.data(), lf.data(), B, T, C, NH);
    EXPECT_LT(rel_diff(of, out), kTolF);
    EXPECT_LT(rel_diff(dqf, dqkv), kTolF);
  }
}

TEST_F(ModelLayers, Gelu) {
  const int64_t N = 3, H = 40;
  VecD x(N * H), R = randn(N * H, 16), out(N * H), dx(N * H, 0.0);
  for (int64_t i = 0; i < N * H; ++i) x[i] = -5.0 + 10.0 * double(i) / double(N * H);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), N, H);
    return dot(out, R);
  };
  loss();
  gelu_backward(dx.data(), x.data(), R.data(), N, H);
  const double e = fd_check(loss, x.data(), dx.data(), x.size());
  report("gelu dx", e);
  EXPECT_LT(e, kTolD);
  VecF xf = to_f(x), Rf = to_f(R), of(N * H), dxf(N * H, 0.f);
  gelu_forward(of.data(), xf.data(), N, H);
  gelu_backward(dxf.data(), xf.data(), Rf.data(), N, H);
  EXPECT_LT(rel_diff(of, out), kTolF);
  EXPECT_LT(rel_diff(dxf, dx), kTolF);
  VecF dx2(N * H, 5.f);
  gelu_backward(dx2.data(), xf.data(), Rf.data(), N, H, false);
  EXPECT_EQ(dx2, dxf);
}

// Scratch for the LM head with chunks of `rows` tokens (packed buffers only for float).
template <class F>
struct LmScratchOwner {
  std::vector<F> wa, wn, xt, x, dxp, logits, stats;
  LmHeadScratch<F> s;
  LmScratchOwner(int64_t V, int64_t C, int64_t rows, int64_t vocab_block) {
    if constexpr (std::is_same_v<F, float>) {
      wa.resize(gemm::packed_a_floats(V, C));
      wn.resize(gemm::packed_b_floats(V, C));
      xt.resize(gemm::packed_b_floats(C, rows));
      x.resize(gemm::packed_b_floats(rows, C));
    }
    logits.resize(V * rows);
    dxp.resize(kLmGroups * rows * C);
    stats.resize((2 * ((V + vocab_block - 1) / vocab_block) + 1) * rows);
    s = LmHeadScratch<F>{wa.data(),     wn.data(),    xt.data(), x.data(),   dxp.data(),
                         logits.data(), stats.data(), rows,      vocab_block};
  }
};

TEST_F(ModelLayers, LmHeadCrossEntropy) {
  const int64_t N = 80, C = 8, V = 1100, rows = 32, vb = 126;  // 3 token chunks (last partial), 9 vocab blocks
  VecD x = randn(N * C, 17), W = randn(V * C, 18, 0.5), losses(N), dx(N * C, 0.0), dW(V * C, 0.0);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = static_cast<int32_t>((n * 977) % V);
  LmScratchOwner<double> sd(V, C, rows, vb);
  const double dloss = 0.7 / double(N);
  auto loss = [&] {
    return dloss * double(N) *
           lm_head_ce<double>(nullptr, nullptr, losses.data(), x.data(), W.data(), tgt.data(), N, C, V, 0.0, sd.s);
  };
  const double mean =
      lm_head_ce(dx.data(), dW.data(), losses.data(), x.data(), W.data(), tgt.data(), N, C, V, dloss, sd.s);
  // the loss itself against a direct computation
  double ref = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> l(V);
    double m = -1e300, z = 0;
    for (int64_t v = 0; v < V; ++v) {
      l[v] = 0;
      for (int64_t c = 0; c < C; ++c) l[v] += x[n * C + c] * W[v * C + c];
      m = std::max(m, l[v]);
    }
    for (int64_t v = 0; v < V; ++v) z += std::exp(l[v] - m);
    ref += std::log(z) + m - l[tgt[n]];
  }
  EXPECT_NEAR(mean, ref / N, 1e-12);
  const double ex = fd_check(loss, x.data(), dx.data(), x.size(), 120),
               ew = fd_check(loss, W.data(), dW.data(), W.size(), 120);
  report("lm head + CE dx", ex);
  report("lm head + CE dW", ew);
  EXPECT_LT(ex, kTolD);
  EXPECT_LT(ew, kTolD);

  // float: packed operands; and overwrite mode
  VecF xf = to_f(x), Wf = to_f(W), dxf(N * C, 0.f), dWf(V * C, 0.f);
  std::vector<double> lossf(N);
  LmScratchOwner<float> sf(V, C, rows, vb);
  const double meanf =
      lm_head_ce(dxf.data(), dWf.data(), lossf.data(), xf.data(), Wf.data(), tgt.data(), N, C, V, float(dloss), sf.s);
  EXPECT_NEAR(meanf, mean, 1e-5 * mean);
  EXPECT_LT(rel_diff(dxf, dx), kTolF);
  EXPECT_LT(rel_diff(dWf, dW), kTolF);
  VecF dx2(N * C, 3.f), dW2(V * C, 0.f);
  lm_head_ce(dx2.data(), dW2.data(), lossf.data(), xf.data(), Wf.data(), tgt.data(), N, C, V, float(dloss), sf.s,
             false);
  EXPECT_EQ(dx2, dxf);
  EXPECT_EQ(dW2, dWf);
}

// Autocast's rounding (layers::round_bf16_value, branch-free so the epilogues vectorize) is gemm::to_bf16's rule bit
// for bit: ties to even, NaN made quiet, zero and denormals to signed zero, infinities and overflow to infinity.
TEST(Bf16Rounding, TheBranchFreeRoundingIsToBf16sRule) {
  auto same = [](float x) {
    const float a = layers::round_bf16_value(x), b = gemm::from_bf16(gemm::to_bf16(x));
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return ua == ub;
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &u, 4);
    ASSERT_TRUE(same(x)) << std::hex << u;
  }
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x3F808000u, 0x3F818000u,
                     0x3F80FFFFu, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u, 0x7FFFFFFFu})
    EXPECT_TRUE(same(std::bit_cast<float>(u))) << std::hex << u;
  std::vector<float> row = {1.0f + 1.0f / 256, -3.14159f, 1e-40f, 65504.0f};
  layers::round_bf16_rows(row.data(), 0, 1, 4);
  EXPECT_EQ(row[0], 1.0f);  // a tie: to even
  EXPECT_EQ(row[1], -3.140625f);
  EXPECT_EQ(row[2], 0.0f);
  EXPECT_EQ(row[3], 65536.0f);
}

}  // namespace
}  // namespace pg
