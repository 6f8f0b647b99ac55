// The learning-rate schedule as plain data (docs/model.md §4): Warmup-Stable-Decay over a run's steps, times a multiple
// (the memory table's lr_mult). Backbone AdamW and the table's row-wise optimizer read the same struct, so nothing
// has to hand a callback across rooms; a checkpoint's config rebuilds it exactly.
#pragma once
#include <cmath>
#include <cstdint>

namespace pg {

// WSD: linear warm-up over the first round(warmup_frac*total) steps (lr ramps (s+1)/W), constant, then linear
// decay to 0 over the last round(decay_frac*total) steps. `step` is 0-based.
inline double wsd_lr(int64_t step, int64_t total, double peak, double warmup_frac, double decay_frac) {
  const int64_t w = static_cast<int64_t>(std::llround(warmup_frac * static_cast<double>(total)));
  const int64_t d = static_cast<int64_t>(std::llround(decay_frac * static_cast<double>(total)));
  if (w > 0 && step < w) return peak * static_cast<double>(step + 1) / static_cast<double>(w);
  if (d > 0 && step >= total - d) return peak * static_cast<double>(total - step) / static_cast<double>(d);
  return peak;
}

struct LrSchedule {
  double peak = 0.0;  // backbone peak learning rate (train.lr)
  int64_t total_steps = 1;  // the run's optimizer steps
  double warmup_frac = 0.0;  // share of steps in warm-up
  double decay_frac = 0.0;  // share of steps in the final linear decay
  double multiple = 1.0;  // lr = multiple × the WSD value (the table: memory.lr_mult)

  // The learning rate of 1-based step t.
  double lr(int64_t t) const {
    const double base = wsd_lr(t - 1, total_steps, peak, warmup_frac, decay_frac);
    return multiple == 1.0 ? base : multiple * base;
  }
  // The same schedule times m (the table's schedule from the backbone's).
  LrSchedule times(double m) const {
    LrSchedule s = *this;
    s.multiple = multiple * m;
    return s;
  }
  // A constant learning rate (benchmarks, tests).
  static LrSchedule constant(double lr) { return LrSchedule{lr, 1, 0.0, 0.0, 1.0}; }
  bool operator==(const LrSchedule&) const = default;
};

}  // namespace pg
