// Collision statistics of a layout over a token stream (docs/model.md §6, report §6, Table 3), per order and head, with
// the analytic expectation beside every number, and the per-token address dump behind `pagegram addresses`. Exact and
// parallel (sort-based distinct n-grams, counting-sort row groups, pair enumeration inside groups), sized for the
// report's 200M tables over tens of millions of tokens. memory/collision_stats.h is the small serial version with the
// same definitions; the tests check that both agree.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "storage/eval_stream.h"
#include "memory/layout.h"

namespace pg {

// The definitions, as printed next to the numbers and stored in the HDF5 file.
// Per order n, over the distinct suffix n-grams of the stream (boundary-padded at document starts, compared by
// their exact token tuples), U of them over N positions; per head k with R_k addressable rows:
//   occupancy   o(r) = distinct n-grams whose head-k row is r, over all R_k rows (empty rows included):
//               mean = U / R_k, variance/mean (expected 1 - 1/R_k ≈ 1 for ideal hashing).
//   foreign     share of the N positions whose head-k row also holds another distinct n-gram (o(r) >= 2);
//               expected 1 - (1 - 1/R_k)^(U-1).
//   cross-head  over unordered pairs of distinct n-grams sharing their head-k row (k = 0 in the summary, as in the
//               report): the share that share at least one other head, and the mean number of other heads shared.
//               PageGram(S): 1 - (1 - 1/S)^(K-1) and (K-1)/S; Engram-style: 1 - Π_{j≠k}(1 - 1/R_j) and
//               Σ_{j≠k} 1/R_j (independent heads); flat: no other head.
//   neighbours  mean number of other distinct n-grams sharing at least one row (any head) with a distinct n-gram;
//               expected (U-1) q, q = P(two n-grams share a row): PageGram (1/P_n)(1 - (1 - 1/S)^K), Engram-style
//               1 - Π_j (1 - 1/R_j), flat 1/R.
std::string collision_definitions();

struct HeadCollisions {
  int64_t order = 0, head = 0;
  int64_t rows = 0;  // R_k
  double mean_occupancy = 0, var_over_mean = 0, exp_var_over_mean = 0;
  int64_t max_occupancy = 0, empty_rows = 0;
  double foreign = 0, exp_foreign = 0;
  int64_t pairs = 0;  // unordered pairs of distinct n-grams sharing this head's row
  double cross_share = 0, cross_extra = 0, exp_cross_share = 0, exp_cross_extra = 0;
  // The columns of `pagegram collisions --out` (storage/FORMATS.md), once.
  template <class V>
  static void columns(V& v) {
    v("order", &HeadCollisions::order);
    v("head", &HeadCollisions::head);
    v("rows", &HeadCollisions::rows);
    v("max_occupancy", &HeadCollisions::max_occupancy);
    v("empty_rows", &HeadCollisions::empty_rows);
    v("pairs", &HeadCollisions::pairs);
    v("mean_occupancy", &HeadCollisions::mean_occupancy);
    v("var_over_mean", &HeadCollisions::var_over_mean);
    v("exp_var_over_mean", &HeadCollisions::exp_var_over_mean);
    v("foreign", &HeadCollisions::foreign);
    v("exp_foreign", &HeadCollisions::exp_foreign);
    v("cross_share", &HeadCollisions::cross_share);
    v("exp_cross_share", &HeadCollisions::exp_cross_share);
    v("cross_extra", &HeadCollisions::cross_extra);
    v("exp_cross_extra", &HeadCollisions::exp_cross_extra);
  }
};

struct OrderCollisions {
  int64_t order = 0;
  int64_t positions = 0;  // N
  int64_t distinct = 0;  // U
  // Occupancy and foreign: means over heads. Cross-head: reference head 0 (the report's definition).
  double mean_occupancy = 0, var_over_mean = 0, exp_var_over_mean = 0;
  double foreign = 0, exp_foreign = 0;
  int64_t head0_pairs = 0;
  double cross_share = 0, cross_extra = 0, exp_cross_share = 0, exp_cross_extra = 0;
  int64_t neighbour_pairs = 0;  // unordered pairs sharing at least one row
  double neighbours = 0, exp_neighbours = 0;
  // The columns of `pagegram collisions --out` (storage/FORMATS.md), once.
  template <class V>
  static void columns(V& v) {
    v("order", &OrderCollisions::order);
    v("positions", &OrderCollisions::positions);
    v("distinct", &OrderCollisions::distinct);
    v("mean_occupancy", &OrderCollisions::mean_occupancy);
    v("var_over_mean", &OrderCollisions::var_over_mean);
    v("exp_var_over_mean", &OrderCollisions::exp_var_over_mean);
    v("foreign", &OrderCollisions::foreign);
    v("exp_foreign", &OrderCollisions::exp_foreign);
    v("head0_pairs", &OrderCollisions::head0_pairs);
    v("cross_share", &OrderCollisions::cross_share);
    v("exp_cross_share", &OrderCollisions::exp_cross_share);
    v("cross_extra", &OrderCollisions::cross_extra);
    v("exp_cross_extra", &OrderCollisions::exp_cross_extra);
    v("neighbour_pairs", &OrderCollisions::neighbour_pairs);
    v("neighbours", &OrderCollisions::neighbours);
    v("exp_neighbours", &OrderCollisions::exp_neighbours);
  }
};

struct LayoutCollisions {
  std::string label;  // "flat", "engram", "pagegram(S=4)"
  std::string layout;
  int64_t slots = 0, heads_per_order = 0, params = 0;
  std::vector<OrderCollisions> orders;
  std::vector<HeadCollisions> heads;  // (order, head) order
  double seconds = 0;
};

// Exact statistics of `layout` over the stream. Memory ≈ 24 B per position + (4K + 8) B per distinct n-gram.
// Throws UserError when the pair enumeration would be unreasonably large (a tiny table for a huge stream).
LayoutCollisions measure_collisions(const MemoryLayout& layout, const EvalStream& stream, bool progress = true);

// The report's Table 3 shape: one line per (layout, order); measured (expected) per column; definitions below.
// per_head adds one line per (layout, order, head).
std::string format_collision_table(const std::vector<LayoutCollisions>& s, bool per_head);
void write_collisions_h5(const std::string& path, const std::vector<LayoutCollisions>& s,
                         const std::vector<std::pair<std::string, std::string>>& attrs);

// `pagegram addresses`: rows [n, heads] and the first 4 KiB block of each row [n, heads] (plus the tokens and
// the layout identity) of stream positions [0, n), written to HDF5 (storage/FORMATS.md).
void write_addresses_h5(const std::string& path, const MemoryLayout& layout, const EvalStream& stream, int64_t n,
                        const std::vector<std::pair<std::string, std::string>>& attrs);

}  // namespace pg
