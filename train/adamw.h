// AdamW over named parameter views (decay on matrices only) and its deterministic global grad norm (docs/model.md §4);
// the learning rate comes from core/schedule.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/schedule.h"  // wsd_lr, LrSchedule

namespace pg {

// One named tensor: parameter and gradient buffers of n floats, decayed or not.
struct ParamView {
  std::string name;
  float* param;
  float* grad;
  size_t n;
  bool decay;
};

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(std::vector<ParamView> views, AdamWSettings s);
  // Global L2 norm of all gradients, summed in double over fixed 4096-element chunks in a fixed order
  // (identical for any thread count).
  double grad_norm() const;
  void scale_grads(float s);
  // One update with step t (1-based, for bias correction) and learning rate lr.
  void step(int64_t t, double lr);
  const std::vector<ParamView>& views() const { return views_; }
  // First and second moments of view i (same layout as its parameter).
  std::span<float> m(size_t i) { return {m_.data() + offsets_[i], views_[i].n}; }
  std::span<float> v(size_t i) { return {v_.data() + offsets_[i], views_[i].n}; }
  // True when both moments hold only finite values.
  bool state_finite() const {
    for (float x : m_)
      if (!std::isfinite(x)) return false;
    for (float x : v_)
      if (!std::isfinite(x)) return false;
    return true;
  }

 private:
  std::vector<ParamView> views_;
  std::vector<size_t> offsets_;
  std::vector<float> m_, v_;
  AdamWSettings s_;
};

}  // namespace pg
