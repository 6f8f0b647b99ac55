// Implementation of memory/flat_layout.h.
#include "memory/flat_layout.h"

#include "memory/hash.h"

namespace pg {

FlatLayout::FlatLayout(const MemoryConfig& cfg, int64_t d_model) : MemoryLayout(cfg, 1, d_model, true) {
  rows_per_order_ = cfg.target_params / (n_orders() * d_model);
  if (rows_per_order_ < 1)
    throw ConfigError(str("memory.target_params: ", cfg.target_params, " is below one row per order (",
                          n_orders() * d_model, " params) for the flat layout"));
  for (int64_t n : orders_) {
    row_seed_.push_back(memhash::derive_seed(hash_seed_, n, 0, memhash::Role::kRow));
    sign_seed_.push_back(memhash::derive_seed(hash_seed_, n, 0, memhash::Role::kSign));
    sizes_.push_back(rows_per_order_);
  }
  rows_ = rows_per_order_ * n_orders();
}

void FlatLayout::address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const {
  const int64_t mo = max_order(), H = heads(), W = sign_words(), no = n_orders();
  const uint64_t last_mask = width_ % 64 == 0 ? ~0ULL : (1ULL << (width_ % 64)) - 1;
  const uint64_t R = static_cast<uint64_t>(rows_per_order_);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t* c = ctx + i * mo;
    for (int64_t o = 0; o < no; ++o) {
      const uint64_t key = memhash::ngram_key(c, orders_[o]);
      rows[i * H + o] = o * rows_per_order_ + static_cast<int64_t>(memhash::keyed_hash(key, row_seed_[o]) % R);
      uint64_t* s = signs + (i * H + o) * W;
      for (int64_t w = 0; w < W; ++w) s[w] = memhash::sign_word(key, sign_seed_[o], w);
      s[W - 1] &= last_mask;
    }
  }
}

std::unique_ptr<MemoryLayout> make_flat_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab*) {
  return std::make_unique<FlatLayout>(cfg, d_model);
}

}  // namespace pg
