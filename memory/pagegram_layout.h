// PageGramLayout(S) (docs/model.md §3, report §3.1): per order a page p_n(x) = b_n(x) mod P_n (P_n prime), then a
// slot per head: row_{n,k} = base_n + (p_n(x) K + k) S + (u_{n,k}(x) mod S). All K head rows of one order lie
// in one page of K*S rows; in the NF4 file a page never straddles a 4 KiB block.
#pragma once
#include <vector>

#include "memory/layout.h"

namespace pg {

class PageGramLayout final : public MemoryLayout {
 public:
  PageGramLayout(const MemoryConfig& cfg, int64_t d_model);
  std::string name() const override { return "pagegram"; }
  int64_t head_row_count(int64_t o, int64_t) const override { return sizes_[o] * slots_; }
  int64_t head_row_index(int64_t o, int64_t, int64_t row) const override {
    const int64_t r = row - base_[o];
    return r / page_rows() * slots_ + r % slots_;
  }
  void address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const override;
  BlockLocation block_of(int64_t row) const override;
  std::vector<std::pair<std::string, std::string>> identity() const override;

  int64_t slots() const override { return slots_; }
  int64_t unit_rows() const override { return page_rows(); }
  int64_t pages(int64_t o) const { return sizes_[o]; }
  int64_t page_rows() const { return heads_per_order_ * slots_; }  // K*S rows per page
  int64_t base(int64_t o) const { return base_[o]; }
  std::vector<Segment> segments() const override {
    std::vector<Segment> s;
    for (int64_t o = 0; o < n_orders(); ++o) s.push_back({base_[o], sizes_[o] * page_rows(), page_rows()});
    return s;
  }
  // Global page index of a row (pages of all orders numbered consecutively).
  int64_t page_of(int64_t row) const { return row / page_rows(); }
  int64_t page_bytes() const { return page_rows() * nf4_bytes_per_row(); }
  // Pages per 4 KiB block (0 when a page exceeds 4 KiB: it then starts its own blocks).
  int64_t pages_per_block() const { return kBlockBytes / page_bytes(); }

 protected:
  int64_t parity_unit() const override { return n_orders() * page_rows() * width_; }

 private:
  int64_t slots_;
  std::vector<int64_t> base_;
  std::vector<uint64_t> page_seed_;  // per order
  std::vector<uint64_t> row_seed_, sign_seed_;  // per (o, k)
};

}  // namespace pg
