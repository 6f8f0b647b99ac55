// Implementation of memory/rowwise_optimizer.h. Every row is updated independently, so parallel loops over
// rows give the same bits for any thread count.
#include "memory/rowwise_optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pg {

RowwiseRmsOptimizer::RowwiseRmsOptimizer(int64_t rows, int64_t width, RowwiseRmsSettings s)
    : rows_(rows), width_(width), s_(s), v_(static_cast<size_t>(rows), 0.0f), last_(static_cast<size_t>(rows), 0) {
  PG_CHECK(rows >= 0 && width >= 1);
}

void RowwiseRmsOptimizer::set_schedule(const LrSchedule& schedule) {
  schedule_ = schedule;
  has_schedule_ = true;
  log_decay_.assign(1, 0.0);
}

double RowwiseRmsOptimizer::lr(int64_t t) const {
  PG_CHECK(has_schedule_, "RowwiseRmsOptimizer: no learning-rate schedule set");
  return schedule_.lr(t);
}

void RowwiseRmsOptimizer::extend_schedule(int64_t t) {
  while (static_cast<int64_t>(beta2_pow_.size()) <= t)
    beta2_pow_.push_back(std::pow(s_.beta2, static_cast<double>(beta2_pow_.size())));
  if (s_.weight_decay == 0.0) return;
  while (static_cast<int64_t>(log_decay_.size()) <= t) {
    const int64_t i = static_cast<int64_t>(log_decay_.size());
    const double f = lr(i) * s_.weight_decay;
    PG_CHECK(f < 1.0, "table lr * weight_decay = ", f, " >= 1 at step ", i);
    log_decay_.push_back(log_decay_.back() + std::log1p(-f));
  }
}

double RowwiseRmsOptimizer::decay_between(int64_t a, int64_t b) const {
  if (s_.weight_decay == 0.0 || b <= a) return 1.0;
  return std::exp(log_decay_[static_cast<size_t>(b)] - log_decay_[static_cast<size_t>(a)]);
}

void RowwiseRmsOptimizer::catch_up_row(float* theta, int64_t row, int64_t t) {
  const int64_t last = last_[static_cast<size_t>(row)];
  const int64_t k = t - last;
  if (k <= 0) return;
  if (s_.weight_decay != 0.0) {
    const float f = static_cast<float>(decay_between(last, t));
    for (int64_t j = 0; j < width_; ++j) theta[j] *= f;
  }
  v_[static_cast<size_t>(row)] = static_cast<float>(v_[static_cast<size_t>(row)] * beta2_pow_[static_cast<size_t>(k)]);
  last_[static_cast<size_t>(row)] = static_cast<int32_t>(t);
}

void RowwiseRmsOptimizer::catch_up(float* table, std::span<const int64_t> rows, int64_t t) {
  extend_schedule(t);
  const int64_t n = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i) catch_up_row(table + rows[i] * width_, rows[i], t);
}

void RowwiseRmsOptimizer::catch_up_all(float* table, int64_t t) {
  extend_schedule(t);
#pragma omp parallel for schedule(static) if (rows_ > 4096)
  for (int64_t r = 0; r < rows_; ++r) catch_up_row(table + r * width_, r, t);
}

void RowwiseRmsOptimizer::update_row(float* theta, int64_t row, const float* g, int64_t t, double eta,
                                     double bias_corr) {
  catch_up_row(theta, row, t - 1);
  double msq = 0.0;
  for (int64_t j = 0; j < width_; ++j) msq += static_cast<double>(g[j]) * g[j];
  msq /= static_cast<double>(width_);
  const float v = static_cast<float>(s_.beta2 * v_[static_cast<size_t>(row)] + (1.0 - s_.beta2) * msq);
  v_[static_cast<size_t>(row)] = v;
  const double denom = std::sqrt(static_cast<double>(v) / bias_corr) + s_.eps;
  const float a = static_cast<float>(1.0 - eta * s_.weight_decay);
  const float b = static_cast<float>(eta / denom);
  for (int64_t j = 0; j < width_; ++j) theta[j] = theta[j] * a - b * g[j];
  last_[static_cast<size_t>(row)] = static_cast<int32_t>(t);
}

void RowwiseRmsOptimizer::update(float* table, std::span<const int64_t> rows, const float* grads, int64_t t) {
  PG_CHECK(t >= 1 && t < INT32_MAX);
  extend_schedule(t);
  const double eta = lr(t);
  const double bias_corr = 1.0 - std::pow(s_.beta2, static_cast<double>(t));
  const int64_t n = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (n > 1024)
  for (int64_t i = 0; i < n; ++i) update_row(table + rows[i] * width_, rows[i], grads + i * width_, t, eta, bias_corr);
}

void RowwiseRmsOptimizer::update(float* table, std::span<const int64_t> rows, std::span<const int32_t> slots,
                                 const float* grads, int64_t t) {
  PG_CHECK(t >= 1 && t < INT32_MAX && slots.size() == rows.size());
  extend_schedule(t);
  const double eta = lr(t);
  const double bias_corr = 1.0 - std::pow(s_.beta2, static_cast<double>(t));
  const int64_t n = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (n > 1024)
  for (int64_t i = 0; i < n; ++i)
    update_row(table + rows[i] * width_, rows[i], grads + static_cast<int64_t>(slots[i]) * width_, t, eta, bias_corr);
}

void RowwiseRmsOptimizer::save(const h5::Group& g) const {
  g.write<float>("v", std::span<const float>(v_), {static_cast<uint64_t>(rows_)});
  g.write<int32_t>("last", std::span<const int32_t>(last_), {static_cast<uint64_t>(rows_)});
  g.set_attr("beta2", s_.beta2);
  g.set_attr("eps", s_.eps);
  g.set_attr("weight_decay", s_.weight_decay);
}

void RowwiseRmsOptimizer::load(const h5::Group& g, int64_t completed_step) {
  g.read_into<float>("v", std::span<float>(v_), {static_cast<uint64_t>(rows_)});
  g.read_into<int32_t>("last", std::span<int32_t>(last_), {static_cast<uint64_t>(rows_)});
  check_state(v_, last_, 0, completed_step, g.file() + ":" + g.path());
}

void RowwiseRmsOptimizer::set_state(std::span<const float> v, std::span<const int32_t> last) {
  PG_CHECK(static_cast<int64_t>(v.size()) == rows_ && static_cast<int64_t>(last.size()) == rows_, "optimizer state of ",
           v.size(), " rows for ", rows_);
  std::copy(v.begin(), v.end(), v_.begin());
  std::copy(last.begin(), last.end(), last_.begin());
}

void RowwiseRmsOptimizer::check_state(std::span<const float> v, std::span<const int32_t> last, int64_t row0,
                                      int64_t completed_step, const std::string& where) {
  for (size_t r = 0; r < v.size(); ++r) {
    const float x = v[r];
    const int32_t l = last[r];
    if (!(std::isfinite(x) && x >= 0.0f) || l < 0 || l > completed_step)
      throw IoError(str(where, ": optimizer state of row ", row0 + static_cast<int64_t>(r), " is invalid (v = ", x,
                        ", last step = ", l, ", table step = ", completed_step,
                        ") (hint: the file is corrupt or was edited)"));
  }
}

}  // namespace pg
