// Readout math (memory/readout.h) against finite differences in double: the W_V projection, the scalar gate and
// both context-gate forms; orthogonal init; identical bits for 1 and 2 threads.
#include "memory/readout.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/rng.h"

namespace pg::readout {
namespace {

std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0) {
  RngStream r(seed, "test.readout");
  std::vector<double> v(n);
  for (auto& x : v) x = r.normal() * scale;
  return v;
}
double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
// Central differences of loss() w.r.t. every element of p, compared with the analytic gradient g.
void check_fd(std::vector<double>& p, const std::vector<double>& g, const std::function<double()>& loss,
              const char* what, double tol = 1e-6) {
  ASSERT_EQ(p.size(), g.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double h = 1e-5, x0 = p[i];
    p[i] = x0 + h;
    const double lp = loss();
    p[i] = x0 - h;
    const double lm = loss();
    p[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(g[i], fd, tol * (1.0 + std::fabs(fd))) << what << "[" << i << "]";
  }
}

TEST(Readout, ProjectionGradientsMatchFiniteDifferences) {
  const int64_t N = 7, C = 5, D = 12;
  auto u = randn(N * D, 1), w = randn(C * D, 2), r = randn(N * C, 3);
  auto loss = [&] {
    std::vector<double> e(N * C);
    ProjectionScratch<double> s;
    project_forward(e.data(), u.data(), w.data(), N, C, D, s);
    return dot(e, r);
  };
  std::vector<double> du(N * D, 0.0), dw(C * D, 0.0);
  ProjectionScratch<double> s;
  project_backward(du.data(), false, dw.data(), r.data(), u.data(), w.data(), N, C, D, s);
  check_fd(u, du, loss, "du");
  check_fd(w, dw, loss, "dW_V");
}

TEST(Readout, ProjectionBackwardOverwritesOrAddsToDu) {
  const int64_t N = 300, C = 40, D = 130;  // N, D not multiples of the task sizes (112)
  auto mk = [](size_t n, uint64_t s) {
    auto d = randn(n, s);
    return std::vector<float>(d.begin(), d.end());
  };
  const auto u = mk(N * D, 30), w = mk(C * D, 31), de = mk(N * C, 32), prior = mk(N * D, 33);
  ProjectionScratch<float> s;
  std::vector<float> du = prior, dw(C * D, 0.f), dw2(C * D, 0.f);  // du starts as garbage: must be overwritten
  project_backward(du.data(), false, dw.data(), de.data(), u.data(), w.data(), N, C, D, s);
  std::vector<float> acc = prior;
  project_backward(acc.data(), true, dw2.data(), de.data(), u.data(), w.data(), N, C, D, s);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t d = 0; d < D; ++d) {
      double ref = 0;
      for (int64_t c = 0; c < C; ++c) ref += static_cast<double>(de[t * C + c]) * w[c * D + d];
      const size_t i = static_cast<size_t>(t * D + d);
      ASSERT_NEAR(du[i], ref, 1e-4 * (1 + std::fabs(ref))) << "du[" << t << ", " << d << "]";
      ASSERT_NEAR(acc[i], prior[i] + ref, 1e-4 * (1 + std::fabs(ref))) << "du += at [" << t << ", " << d << "]";
    }
  for (int64_t c = 0; c < C; ++c)  // dW over two column tasks (D = 130 > 112), through the transposed scratch
    for (int64_t d = 0; d < D; ++d) {
      double ref = 0;
      for (int64_t t = 0; t < N; ++t) ref += static_cast<double>(de[t * C + c]) * u[t * D + d];
      ASSERT_NEAR(dw[static_cast<size_t>(c * D + d)], ref, 1e-4 * (1 + std::fabs(ref)))
          << "dW[" << c << ", " << d << "]";
    }
  EXPECT_EQ(0, std::memcmp(dw.data(), dw2.data(), dw.size() * sizeof(float))) << "dW must not depend on du's mode";
}

TEST(Readout, ScalarGateGradientsMatchFiniteDifferences) {
  const int64_t N = 6, C = 4;
  auto x = randn(N * C, 4), e = randn(N * C, 5), r = randn(N * C, 6);
  std::vector<double> g = {0.5};
  auto loss = [&] {
    std::vector<double> y = x;
    scalar_gate_forward(y.data(), e.data(), g[0], N, C);
    return dot(y, r);
  };
  std::vector<double> de(N * C, 0.0), dg = {0.0};
  scalar_gate_backward(de.data(), dg.data(), r.data(), e.data(), g[0], N, C);
  check_fd(g, dg, loss, "dg");
  check_fd(e, de, loss, "de");
}

void context_gate_fd(GateForm form) {
  const int64_t N = 5, C = 16;
  auto h = randn(N * C, 7), k = randn(N * C, 8), v = randn(N * C, 9), r = randn(N * C, 10);
  auto wh = randn(C, 11, 0.3), wk = randn(C, 12, 0.3);
  for (auto& x : wh) x += 1.0;
  for (auto& x : wk) x += 1.0;
  const double eps = 1e-6;
  auto loss = [&] {
    std::vector<double> x = h, hs(N * C), a(N);
    context_gate_forward(x.data(), hs.data(), a.data(), k.data(), v.data(), wh.data(), wk.data(), N, C, eps, form);
    return dot(x, r);
  };
  std::vector<double> x = h, hs(N * C), a(N);
  context_gate_forward(x.data(), hs.data(), a.data(), k.data(), v.data(), wh.data(), wk.data(), N, C, eps, form);
  for (int64_t t = 0; t < N; ++t) ASSERT_TRUE(a[t] > 0 && a[t] < 1);
  ASSERT_EQ(hs, h);
  std::vector<double> dx = r, dk(N * C, 0.0), dv(N * C, 0.0), dwh(C, 0.0), dwk(C, 0.0);
  context_gate_backward(dx.data(), dk.data(), dv.data(), dwh.data(), dwk.data(), h.data(), k.data(), v.data(),
                        wh.data(), wk.data(), N, C, eps, form);
  check_fd(h, dx, loss, "dh");
  check_fd(k, dk, loss, "dk");
  check_fd(v, dv, loss, "dv");
  check_fd(wh, dwh, loss, "dwh");
  check_fd(wk, dwk, loss, "dwk");
}

TEST(Readout, ContextGateSigmoidMatchesFiniteDifferences) { context_gate_fd(GateForm::kSigmoid); }
TEST(Readout, ContextGateSignedSqrtMatchesFiniteDifferences) { context_gate_fd(GateForm::kSignedSqrt); }

TEST(Readout, SignedSqrtGateValues) {
  // One token, C = 1: s = sign(h k) (RMSNorm of a scalar is ±1), so α = σ(±1) for both forms; with a zero key
  // s = 0 -> σ(sqrt(1e-6)) = σ(0.001) in the signed-sqrt form.
  const double h = 2.0, kpos = 3.0, kzero = 0.0, v = 1.0, w = 1.0;
  double x = h, hs, a;
  context_gate_forward(&x, &hs, &a, &kpos, &v, &w, &w, 1, 1, 0.0, GateForm::kSignedSqrt);
  EXPECT_NEAR(a, 1.0 / (1.0 + std::exp(-1.0)), 1e-12);
  x = h;
  context_gate_forward(&x, &hs, &a, &kzero, &v, &w, &w, 1, 1, 1e-6, GateForm::kSignedSqrt);
  EXPECT_NEAR(a, 1.0 / (1.0 + std::exp(-0.001)), 1e-12);
  EXPECT_NEAR(x, h + a * v, 1e-15);
}

TEST(Readout, OrthogonalInitHasOrthonormalRowsTimesGain) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{24, 64}, {64, 24}}) {
    std::vector<float> w(rows * cols), w2(rows * cols);
    const double gain = std::sqrt(2.0 * 24 / 64);
    orthogonal_init(w.data(), rows, cols, gain, RngStream(5, "memory.init").child("w_v"));
    orthogonal_init(w2.data(), rows, cols, gain, RngStream(5, "memory.init").child("w_v"));
    EXPECT_EQ(w, w2) << "deterministic";
    const bool by_rows = rows <= cols;
    const int64_t nv = by_rows ? rows : cols, len = by_rows ? cols : rows;
    for (int64_t a = 0; a < nv; ++a)
      for (int64_t b = 0; b < nv; ++b) {
        double d = 0;
        for (int64_t c = 0; c < len; ++c)
          d += by_rows ? double(w[a * cols + c]) * w[b * cols + c] : double(w[c * cols + a]) * w[c * cols + b];
        EXPECT_NEAR(d, a == b ? gain * gain : 0.0, 1e-5);
      }
  }
}

TEST(Readout, OneAndTwoThreadsGiveIdenticalBits) {
  const int64_t N = 700, C = 48, D = 300;  // N, D not multiples of the task sizes (112 rows, 112 columns)
  auto mk = [](size_t n, uint64_t s) {
    auto d = randn(n, s);
    return std::vector<float>(d.begin(), d.end());
  };
  const auto u = mk(N * D, 20), w = mk(C * D, 21), r = mk(N * C, 22), k = mk(N * C, 23), wh = mk(C, 24);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> e(N * C), du(N * D, 0.f), dw(C * D, 0.f), x = r, hs(N * C), a(N), dx = k, dk(N * C, 0.f),
                                                                 dv(N * C, 0.f), dwh(C, 0.f), dwk(C, 0.f), dg = {0.f};
    ProjectionScratch<float> s;
    project_forward(e.data(), u.data(), w.data(), N, C, D, s);
    project_backward(du.data(), false, dw.data(), r.data(), u.data(), w.data(), N, C, D, s);
    context_gate_forward(x.data(), hs.data(), a.data(), k.data(), e.data(), wh.data(), wh.data(), N, C, 1e-6,
                         GateForm::kSigmoid);
    context_gate_backward(dx.data(), dk.data(), dv.data(), dwh.data(), dwk.data(), hs.data(), k.data(), e.data(),
                          wh.data(), wh.data(), N, C, 1e-6, GateForm::kSigmoid);
    scalar_gate_backward(dv.data(), dg.data(), r.data(), e.data(), 0.5f, N, C);
    omp_set_num_threads(2);
    std::vector<float> all;
    for (const auto* v : {&e, &du, &dw, &x, &dx, &dk, &dv, &dwh, &dwk, &dg})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  const auto a = run(1), b = run(2);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

}  // namespace
}  // namespace pg::readout
