// FlatLayout (docs/model.md §3): one row of width d per order, row_n = base_n + h_n(x) mod R_n, R_n = target/(n_orders
// d); the readout is the signed sum e_t = sum_n s_n(x) ⊙ T[row_n] (no projection).
#pragma once
#include <vector>

#include "memory/layout.h"

namespace pg {

class FlatLayout final : public MemoryLayout {
 public:
  FlatLayout(const MemoryConfig& cfg, int64_t d_model);
  std::string name() const override { return "flat"; }
  int64_t head_row_count(int64_t, int64_t) const override { return rows_per_order_; }
  int64_t head_row_index(int64_t o, int64_t, int64_t row) const override { return row - o * rows_per_order_; }
  void address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const override;
  int64_t rows_per_order() const { return rows_per_order_; }
  std::vector<Segment> segments() const override {
    std::vector<Segment> s;
    for (int64_t o = 0; o < n_orders(); ++o) s.push_back({o * rows_per_order_, rows_per_order_, 1});
    return s;
  }

 protected:
  int64_t parity_unit() const override { return n_orders() * width_; }

 private:
  int64_t rows_per_order_;
  std::vector<uint64_t> row_seed_, sign_seed_;  // per order
};

}  // namespace pg
