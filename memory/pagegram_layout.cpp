// Implementation of memory/pagegram_layout.h.
#include "memory/pagegram_layout.h"

#include "memory/hash.h"

namespace pg {

PageGramLayout::PageGramLayout(const MemoryConfig& cfg, int64_t d_model)
    : MemoryLayout(cfg, cfg.heads, cfg.head_dim, false), slots_(cfg.slots) {
  const int64_t K = heads_per_order_;
  const double t = static_cast<double>(cfg.target_params) / static_cast<double>(n_orders() * K * slots_ * width_);
  sizes_ = memhash::nearest_primes(t, n_orders());
  int64_t b = 0;
  for (int64_t o = 0; o < n_orders(); ++o) {
    base_.push_back(b);
    b += sizes_[o] * K * slots_;
    page_seed_.push_back(memhash::derive_seed(hash_seed_, orders_[o], 0, memhash::Role::kPage));
    for (int64_t k = 0; k < K; ++k) {
      row_seed_.push_back(memhash::derive_seed(hash_seed_, orders_[o], k, memhash::Role::kRow));
      sign_seed_.push_back(memhash::derive_seed(hash_seed_, orders_[o], k, memhash::Role::kSign));
    }
  }
  rows_ = b;
}

void PageGramLayout::address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const {
  const int64_t mo = max_order(), H = heads(), W = sign_words(), K = heads_per_order_, no = n_orders();
  const uint64_t last_mask = width_ % 64 == 0 ? ~0ULL : (1ULL << (width_ % 64)) - 1;
  const uint64_t S = static_cast<uint64_t>(slots_);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t* c = ctx + i * mo;
    for (int64_t o = 0; o < no; ++o) {
      const uint64_t key = memhash::ngram_key(c, orders_[o]);
      const int64_t page =
          static_cast<int64_t>(memhash::keyed_hash(key, page_seed_[o]) % static_cast<uint64_t>(sizes_[o]));
      for (int64_t k = 0; k < K; ++k) {
        const int64_t h = o * K + k;
        const int64_t slot = static_cast<int64_t>(memhash::keyed_hash(key, row_seed_[h]) % S);
        rows[i * H + h] = base_[o] + (page * K + k) * slots_ + slot;
        uint64_t* s = signs + (i * H + h) * W;
        for (int64_t w = 0; w < W; ++w) s[w] = memhash::sign_word(key, sign_seed_[h], w);
        s[W - 1] &= last_mask;
      }
    }
  }
}

BlockLocation PageGramLayout::block_of(int64_t row) const {
  const int64_t page = page_of(row), in_page = row % page_rows(), pb = page_bytes();
  BlockLocation b;
  const int64_t ppb = pages_per_block();
  if (ppb >= 1) {
    b.block = page / ppb;
    b.offset = (page % ppb) * pb + in_page * nf4_bytes_per_row();
  } else {
    b.blocks = (pb + kBlockBytes - 1) / kBlockBytes;
    b.block = page * b.blocks;
    b.offset = in_page * nf4_bytes_per_row();  // may exceed 4096: the page spans b.blocks blocks
  }
  return b;
}

std::vector<std::pair<std::string, std::string>> PageGramLayout::identity() const {
  auto id = MemoryLayout::identity();
  id.push_back({"slots", std::to_string(slots_)});
  return id;
}

std::unique_ptr<MemoryLayout> make_pagegram_layout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab*) {
  return std::make_unique<PageGramLayout>(cfg, d_model);
}

}  // namespace pg
