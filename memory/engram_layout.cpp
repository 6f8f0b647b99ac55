// Implementation of memory/engram_layout.h.
#include "memory/engram_layout.h"

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "memory/hash.h"

namespace pg {

EngramLayout::EngramLayout(const MemoryConfig& cfg, int64_t d_model, const CompressedVocab* vocab)
    : MemoryLayout(cfg, cfg.heads, cfg.head_dim, false), faithful_(cfg.hash.engram_faithful) {
  const int64_t K = heads_per_order_, m = heads();
  const double t = static_cast<double>(cfg.target_params) / static_cast<double>(m * width_);
  if (faithful_) {
    if (!vocab || vocab->map.empty())
      throw ConfigError(
          "memory.hash.engram_faithful: needs the tokenizer's compressed vocabulary (hint: build it "
          "with compress_vocabulary() from the tokenizer pieces and pass it to make_layout)");
    sizes_ = memhash::consecutive_primes(std::max<int64_t>(2, std::llround(t)), m);
    map_ = vocab->map;
    pad_ = vocab->size;
    uint64_t d = mix64(map_.size());
    for (uint32_t x : map_) d = mix64(d ^ x);
    map_digest_ = d;
    // Odd multipliers below INT64_MAX / (ids incl. pad), so x' * m never overflows (as in Engram's code).
    const uint64_t m_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / (pad_ + 1);
    const uint64_t half = std::max<uint64_t>(1, m_max / 2);
    RngStream rng(hash_seed_, "memory.engram.multipliers");
    for (int64_t i = 0; i < max_order(); ++i) mult_.push_back(rng.below(half) * 2 + 1);
  } else {
    sizes_ = memhash::nearest_primes(t, m);
  }
  int64_t b = 0;
  for (int64_t o = 0; o < n_orders(); ++o)
    for (int64_t k = 0; k < K; ++k) {
      base_.push_back(b);
      b += sizes_[o * K + k];
      row_seed_.push_back(memhash::derive_seed(hash_seed_, orders_[o], k, memhash::Role::kRow));
      sign_seed_.push_back(memhash::derive_seed(hash_seed_, orders_[o], k, memhash::Role::kSign));
    }
  rows_ = b;
}

void EngramLayout::address(const uint64_t* ctx, int64_t n, int64_t* rows, uint64_t* signs) const {
  const int64_t mo = max_order(), H = heads(), W = sign_words(), K = heads_per_order_, no = n_orders();
  const uint64_t last_mask = width_ % 64 == 0 ? ~0ULL : (1ULL << (width_ % 64)) - 1;
  uint64_t cc[8];
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t* c = ctx + i * mo;
    if (faithful_) {
      // Compressed ids; the boundary and any id outside the vocabulary become the pad id.
      for (int64_t j = 0; j < mo; ++j) cc[j] = c[j] < map_.size() ? map_[c[j]] : pad_;
      c = cc;
    }
    for (int64_t o = 0; o < no; ++o) {
      const int64_t nn = orders_[o];
      const uint64_t key = memhash::ngram_key(c, nn);
      uint64_t mix = 0;
      if (faithful_)
        for (int64_t j = 0; j < nn; ++j) mix ^= c[j] * mult_[j];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t h = o * K + k;
        const uint64_t P = static_cast<uint64_t>(sizes_[h]);
        const uint64_t u = faithful_ ? mix : memhash::keyed_hash(key, row_seed_[h]);
        rows[i * H + h] = base_[h] + static_cast<int64_t>(u % P);
        uint64_t* s = signs + (i * H + h) * W;
        for (int64_t w = 0; w < W; ++w) s[w] = memhash::sign_word(key, sign_seed_[h], w);
        s[W - 1] &= last_mask;
      }
    }
  }
}

std::vector<std::pair<std::string, std::string>> EngramLayout::identity() const {
  auto id = MemoryLayout::identity();
  id.push_back({"engram_faithful", faithful_ ? "1" : "0"});
  if (faithful_) {
    id.push_back({"compressed_vocab", std::to_string(pad_)});
    id.push_back({"compressed_map_digest", std::to_string(map_digest_)});
    std::string m;
    for (size_t i = 0; i < mult_.size(); ++i) m += (i ? "," : "") + std::to_string(mult_[i]);
    id.push_back({"multipliers", m});
  }
  return id;
}

std::unique_ptr<MemoryLayout> make_engram_layout(const MemoryConfig& cfg, int64_t d_model,
                                                 const CompressedVocab* vocab) {
  return std::make_unique<EngramLayout>(cfg, d_model, vocab);
}

}  // namespace pg
