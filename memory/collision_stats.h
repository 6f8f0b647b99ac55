// Collision statistics of a layout over a reference token stream (docs/model.md §6, report §6 / Table 3).
// Definitions (per order n; "distinct n-grams" = distinct suffix n-grams of the stream, boundary-padded):
//   occupancy      o(row) = distinct n-grams whose head-k row is `row`, over all rows head k can address;
//                  mean and variance/mean averaged over heads (≈ 1.0 for ideal hashing).
//   foreign        share of stream positions whose head-k row also holds another distinct n-gram
//                  (o(row) >= 2), averaged over heads (report: bigram 66.9%, trigram 89.4%).
//   cross-head     over unordered pairs of distinct n-grams sharing their head-0 row: the share that also
//                  share at least one other head, and the mean number of other shared heads
//                  (PageGram: (K-1)/S; Engram-style: Σ_{k>=1} 1/P_{n,k}).
//   neighbours     mean number of other distinct n-grams sharing at least one row (any head).
// Memory ~ positions * (8 + 8K) bytes per order: meant for test and analysis streams, not whole corpora.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "memory/layout.h"

namespace pg {

struct OrderCollisionStats {
  int64_t order = 0;
  int64_t positions = 0;
  int64_t distinct = 0;
  double mean_occupancy = 0.0;
  double var_over_mean = 0.0;
  double foreign = 0.0;
  int64_t head0_pairs = 0;
  double cross_share = 0.0;
  double cross_mean_extra = 0.0;
  double mean_neighbours = 0.0;
};

std::vector<OrderCollisionStats> collision_stats(const MemoryLayout& layout, std::span<const uint32_t> tokens,
                                                 std::span<const uint64_t> doc_offsets);

}  // namespace pg
