// RowwiseRmsOptimizer (docs/model.md §4, report §3.3): per table row one second-moment scalar v_r and the last step
// it is current to; skipped steps are replayed lazily, so a sparse update equals a dense one (g = 0 rows).
//
// At step t (1-based) for a touched row with summed gradient g (width w):
//   replay steps last+1 .. t-1:  θ ← θ · Π (1 − η_i λ_T),  v ← v · β2^k  (k = t-1-last)
//   v ← β2 v + (1−β2) mean(g²);  θ ← θ (1 − η_t λ_T) − η_t g / (sqrt(v / (1−β2^t)) + ε)
// The decay product over a step range is exp(L[b] − L[a]) with L[t] = Σ_{i<=t} log1p(−η_i λ_T) in double
// (exactly 1 when λ_T = 0). η_t comes from the run's schedule (core/schedule.h; table lr = lr_mult × backbone lr).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/h5.h"
#include "core/schedule.h"

namespace pg {

struct RowwiseRmsSettings {
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // λ_T
};

class RowwiseRmsOptimizer {
 public:
  RowwiseRmsOptimizer(int64_t rows, int64_t width, RowwiseRmsSettings s);
  // The table's learning-rate schedule (η_t = schedule.lr(t)). Must be set before the first update.
  void set_schedule(const LrSchedule& schedule);
  const LrSchedule& schedule() const { return schedule_; }
  double lr(int64_t t) const;

  // Brings rows (unique) to the end of step t as if every step since their last update had g = 0.
  // Parallel over rows; the table is [rows, width].
  void catch_up(float* table, std::span<const int64_t> rows, int64_t t);
  void catch_up_all(float* table, int64_t t);
  // Step t for `rows` (unique; any order): grads [rows.size(), width] are their summed gradients.
  void update(float* table, std::span<const int64_t> rows, const float* grads, int64_t t);
  // Same, with gradient i of rows[i] at grads + slots[i] * width (an accumulator's indirection).
  void update(float* table, std::span<const int64_t> rows, std::span<const int32_t> slots, const float* grads,
              int64_t t);

  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  const RowwiseRmsSettings& settings() const { return s_; }
  std::span<const float> v() const { return v_; }
  std::span<const int32_t> last() const { return last_; }

  // Datasets "v" [rows] and "last" [rows] of a group; load validates shapes and values (IoError).
  void save(const h5::Group& g) const;
  void load(const h5::Group& g, int64_t completed_step);
  // The state of this optimizer's rows read elsewhere (a saved table's range, memory/table.h SavedTable, which
  // validated it with check_state): copied in.
  void set_state(std::span<const float> v, std::span<const int32_t> last);
  // IoError naming `where` and the row (row0 + i) unless every v is finite and >= 0 and every last in
  // [0, completed_step].
  static void check_state(std::span<const float> v, std::span<const int32_t> last, int64_t row0, int64_t completed_step,
                          const std::string& where);

 private:
  void extend_schedule(int64_t t);  // grows log_decay_ and beta2_pow_ to cover step t (outside parallel regions)
  double decay_between(int64_t a, int64_t b) const;  // Π_{i=a+1}^{b} (1 − η_i λ_T)
  void catch_up_row(float* theta, int64_t row, int64_t t);
  void update_row(float* theta, int64_t row, const float* g, int64_t t, double eta, double bias_corr);

  int64_t rows_, width_;
  RowwiseRmsSettings s_;
  std::vector<float> v_;
  std::vector<int32_t> last_;
  LrSchedule schedule_;
  bool has_schedule_ = false;
  std::vector<double> log_decay_{0.0};  // L[0..]
  std::vector<double> beta2_pow_{1.0};  // beta2^k (std::pow, computed once per k: the same bits as per row)
};

}  // namespace pg
