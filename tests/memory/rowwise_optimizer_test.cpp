// RowwiseRmsOptimizer (docs/model.md §4): the sparse update with replayed decay equals a dense update of every row at
// every step (untouched rows get g = 0), over many steps with rows skipped for long stretches.
#include "memory/rowwise_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"

namespace pg {
namespace {

// The dense reference: every row, every step, the docs/model.md §4 formula in the same precision as the optimizer.
struct DenseReference {
  int64_t rows, width;
  RowwiseRmsSettings s;
  std::vector<float> theta, v;
  DenseReference(int64_t r, int64_t w, RowwiseRmsSettings st)
      : rows(r), width(w), s(st), theta(static_cast<size_t>(r * w)), v(static_cast<size_t>(r)) {}
  void step(int64_t t, double eta, const std::vector<float>& g /*[rows, width], zeros for untouched*/) {
    const double bc = 1.0 - std::pow(s.beta2, static_cast<double>(t));
    for (int64_t r = 0; r < rows; ++r) {
      double msq = 0;
      for (int64_t j = 0; j < width; ++j)
        msq += static_cast<double>(g[static_cast<size_t>(r * width + j)]) * g[static_cast<size_t>(r * width + j)];
      msq /= static_cast<double>(width);
      v[static_cast<size_t>(r)] = static_cast<float>(s.beta2 * v[static_cast<size_t>(r)] + (1.0 - s.beta2) * msq);
      const double denom = std::sqrt(static_cast<double>(v[static_cast<size_t>(r)]) / bc) + s.eps;
      const float a = static_cast<float>(1.0 - eta * s.weight_decay), b = static_cast<float>(eta / denom);
      for (int64_t j = 0; j < width; ++j) {
        float& th = theta[static_cast<size_t>(r * width + j)];
        th = th * a - b * g[static_cast<size_t>(r * width + j)];
      }
    }
  }
};

// Runs `steps` steps where row r is touched with probability p_r (rows 0..9 every step, some never).
void compare(double weight_decay, int64_t steps, double* max_theta_err, double* max_v_err, double* max_theta) {
  const int64_t R = 120, W = 16;
  const RowwiseRmsSettings s{0.95, 1e-8, weight_decay};
  const LrSchedule sched{0.14, steps, 0.1, 0.2};  // WSD: warm-up, stable, linear decay (never 0 inside the run)
  RowwiseRmsOptimizer opt(R, W, s);
  opt.set_schedule(sched);
  std::vector<float> table(static_cast<size_t>(R * W));
  DenseReference ref(R, W, s);
  RngStream rng(1, "test.opt");
  for (size_t i = 0; i < table.size(); ++i) table[i] = ref.theta[i] = static_cast<float>(rng.normal() * 0.1);
  std::vector<float> dense(static_cast<size_t>(R * W));
  for (int64_t t = 1; t <= steps; ++t) {
    std::fill(dense.begin(), dense.end(), 0.0f);
    std::vector<int64_t> rows;
    std::vector<float> grads;
    for (int64_t r = 0; r < R; ++r) {
      const double p = r < 10 ? 1.0 : (r >= 110 ? 0.0 : 1.0 / static_cast<double>(r));  // rows 100+: ~1% of steps
      if (rng.uniform() >= p) continue;
      rows.push_back(r);
      const double scale = std::pow(10.0, static_cast<double>(r % 5) - 4.0);
      for (int64_t j = 0; j < W; ++j) {
        const float g = static_cast<float>(rng.normal() * scale);
        grads.push_back(g);
        dense[static_cast<size_t>(r * W + j)] = g;
      }
    }
    // Touched rows in a shuffled order: the result must not depend on it.
    std::reverse(rows.begin(), rows.end());
    std::vector<float> rg(grads.size());
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy_n(grads.begin() + static_cast<int64_t>((rows.size() - 1 - i) * W), W,
                  rg.begin() + static_cast<int64_t>(i * W));
    opt.update(table.data(), rows, rg.data(), t);
    ref.step(t, sched.lr(t), dense);
  }
  opt.catch_up_all(table.data(), steps);
  *max_theta_err = *max_v_err = *max_theta = 0;
  for (size_t i = 0; i < table.size(); ++i)
    *max_theta = std::max(*max_theta, static_cast<double>(std::fabs(ref.theta[i])));
  // θ error per row, relative to that row's largest |θ| (elements passing near 0 make pure ratios meaningless).
  for (int64_t r = 0; r < R; ++r) {
    double scale = 0, err = 0;
    for (int64_t j = 0; j < W; ++j) {
      const size_t i = static_cast<size_t>(r * W + j);
      scale = std::max(scale, static_cast<double>(std::fabs(ref.theta[i])));
      err = std::max(err, std::fabs(static_cast<double>(table[i]) - ref.theta[i]));
    }
    *max_theta_err = std::max(*max_theta_err, err / scale);
  }
  for (int64_t r = 0; r < R; ++r)
    *max_v_err = std::max(
        *max_v_err, std::fabs(static_cast<double>(opt.v()[static_cast<size_t>(r)]) - ref.v[static_cast<size_t>(r)]) /
                        (ref.v[static_cast<size_t>(r)] + 1e-30));
  EXPECT_EQ(opt.last()[0], steps);
}

// Tolerance: the replay multiplies by exp(ΣL) and β2^k in double where the dense reference rounds to float
// every step, so the two drift apart by float rounding only: max |Δθ| of a row ≤ 1e-5 × the row's max |θ|,
// relative |Δv| ≤ 1e-5, over 400 steps with rows skipped up to hundreds of steps (measured: ~1e-6).
TEST(RowwiseRmsOptimizer, SparseEqualsDenseWithoutDecay) {
  double et, ev, mt;
  compare(0.0, 400, &et, &ev, &mt);
  EXPECT_LT(et, 1e-5) << "max relative θ error";
  EXPECT_LT(ev, 1e-5) << "max relative v error";
  EXPECT_GT(mt, 0.1);
}

TEST(RowwiseRmsOptimizer, SparseEqualsDenseWithReplayedDecay) {
  double et, ev, mt;
  compare(0.1, 400, &et, &ev, &mt);
  EXPECT_LT(et, 1e-5) << "max relative θ error";
  EXPECT_LT(ev, 1e-5) << "max relative v error";
}

TEST(RowwiseRmsOptimizer, RowsTouchedEveryStepAreBitExact) {
  // No replay involved: identical arithmetic to the dense reference.
  const RowwiseRmsSettings s{0.95, 1e-8, 0.05};
  RowwiseRmsOptimizer opt(3, 8, s);
  const LrSchedule ramp{0.5, 50, 1.0, 0.0};  // warm-up over all 50 steps: 0.01 t
  opt.set_schedule(ramp);
  DenseReference ref(3, 8, s);
  std::vector<float> table(24, 0.5f);
  ref.theta = table;
  RngStream rng(2, "test.exact");
  for (int64_t t = 1; t <= 50; ++t) {
    std::vector<float> g(24);
    for (auto& x : g) x = static_cast<float>(rng.normal());
    const std::vector<int64_t> rows = {0, 1, 2};
    opt.update(table.data(), rows, g.data(), t);
    ref.step(t, ramp.lr(t), g);
  }
  for (size_t i = 0; i < table.size(); ++i) ASSERT_EQ(table[i], ref.theta[i]);
}

TEST(RowwiseRmsOptimizer, FirstStepMovesByLearningRate) {
  // v_hat = mean(g²) at t = 1, so a row with constant |g| moves by ≈ η per element (scale-free update).
  RowwiseRmsOptimizer opt(1, 4, {0.95, 0.0, 0.0});
  opt.set_schedule(LrSchedule::constant(0.14));
  std::vector<float> theta(4, 0.0f);
  const std::vector<float> g = {1e-6f, -1e-6f, 1e-6f, -1e-6f};
  const std::vector<int64_t> rows = {0};
  opt.update(theta.data(), rows, g.data(), 1);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(theta[static_cast<size_t>(j)], j % 2 ? 0.14 : -0.14, 1e-6);
}

}  // namespace
}  // namespace pg
