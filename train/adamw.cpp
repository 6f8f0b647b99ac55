// Implementation of train/adamw.h.
#include "train/adamw.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pg {

AdamW::AdamW(std::vector<ParamView> views, AdamWSettings s) : views_(std::move(views)), s_(s) {
  size_t total = 0;
  for (const auto& v : views_) {
    offsets_.push_back(total);
    total += v.n;
  }
  m_.assign(total, 0.0f);
  v_.assign(total, 0.0f);
}

double AdamW::grad_norm() const {
  constexpr size_t kChunk = 4096;
  std::vector<std::pair<size_t, size_t>> chunks;  // (view, start)
  for (size_t i = 0; i < views_.size(); ++i)
    for (size_t s = 0; s < views_[i].n; s += kChunk) chunks.emplace_back(i, s);
  std::vector<double> partial(chunks.size());
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks.size(); ++c) {
    const auto& v = views_[chunks[c].first];
    const size_t s = chunks[c].second, e = std::min(v.n, s + kChunk);
    double acc = 0;
    for (size_t j = s; j < e; ++j) acc += static_cast<double>(v.grad[j]) * v.grad[j];
    partial[c] = acc;
  }
  double sum = 0;
  for (double p : partial) sum += p;
  return std::sqrt(sum);
}

void AdamW::scale_grads(float s) {
  for (auto& v : views_) {
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < v.n; ++j) v.grad[j] *= s;
  }
}

void AdamW::step(int64_t t, double lr) {
  PG_CHECK(t >= 1);
  const float b1 = static_cast<float>(s_.beta1), b2 = static_cast<float>(s_.beta2);
  const float bc1 = static_cast<float>(1.0 - std::pow(s_.beta1, static_cast<double>(t)));
  const float bc2 = static_cast<float>(1.0 - std::pow(s_.beta2, static_cast<double>(t)));
  const float lrf = static_cast<float>(lr), eps = static_cast<float>(s_.eps);
  for (size_t i = 0; i < views_.size(); ++i) {
    const ParamView& pv = views_[i];
    float* m = m_.data() + offsets_[i];
    float* v = v_.data() + offsets_[i];
    const float decay = pv.decay ? static_cast<float>(1.0 - lr * s_.weight_decay) : 1.0f;
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < pv.n; ++j) {
      const float g = pv.grad[j];
      m[j] = b1 * m[j] + (1.0f - b1) * g;
      v[j] = b2 * v[j] + (1.0f - b2) * g * g;
      const float mhat = m[j] / bc1, vhat = v[j] / bc2;
      pv.param[j] = pv.param[j] * decay - lrf * mhat / (std::sqrt(vhat) + eps);
    }
  }
}

}  // namespace pg
