// EngramLayout (docs/model.md §3): per order n and head k an independent hash into its own sub-table of prime size
// P_{n,k} (all distinct, ≈ target/(n_orders K r)): row_{n,k} = base_{n,k} + u_{n,k}(x) mod P_{n,k}.
// Optional Engram-faithful hashing: compressed vocabulary, mix = XOR_i x'_{t-i} m_i (odd m_i), one mix per
// order shared by its heads, consecutive primes above the target. Differences from Engram's released code: the
// boundary (pad) id is the compressed vocabulary size (our tokenizers have no pad token), the multipliers come
// from RngStream(hash.seed, "memory.engram.multipliers") instead of numpy's generator, there is one table (not
// one per layer), and the readout keeps its sign vectors (hashed from the compressed n-gram).
#pragma once
#include <vector>

#include "memory/layout.h"
#include "memory/normalize.h"

namespace pg {

class EngramLayout final : public MemoryLayout {
 public:
  // vocab: required when cfg.hash.engram_faithful (ConfigError otherwise), ignored when not.
  EngramLayout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab* vocab);
  std::string name() const override { return "engram"; }
  int64_t head_row_count(int64_t o, int64_t k) const override { return sizes_[o * heads_per_order_ + k]; }
  int64_t head_row_index(int64_t o, int64_t k, int64_t row) const override {
    return row - base_[o * heads_per_order_ + k];
  }
  void address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const override;
  std::vector<std::pair<std::string, std::string>> identity() const override;

  bool faithful() const { return faithful_; }
  // First row of sub-table (o, k).
  int64_t base(int64_t o, int64_t k) const { return base_[o * heads_per_order_ + k]; }
  std::vector<Segment> segments() const override {
    std::vector<Segment> s;
    for (size_t i = 0; i < base_.size(); ++i) s.push_back({base_[i], sizes_[i], 1});
    return s;
  }
  // Engram-faithful: the odd multiplier of shift i (0 = current token), and the compressed id of the
  // boundary (pad) token.
  const std::vector<uint64_t>& multipliers() const { return mult_; }
  uint64_t pad_id() const { return pad_; }

 protected:
  int64_t parity_unit() const override { return heads() * width_; }

 private:
  std::vector<int64_t> base_;
  std::vector<uint64_t> row_seed_, sign_seed_;  // per (o, k)
  bool faithful_ = false;
  std::vector<uint32_t> map_;
  uint64_t pad_ = 0, map_digest_ = 0;
  std::vector<uint64_t> mult_;
};

}  // namespace pg
