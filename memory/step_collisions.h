// Per-step collision statistics of a training batch (logged to the run log's /collisions
// group, train/FORMATS.md, "Run log"). The trainer hands every micro-batch's addresses and n-gram keys of one optimizer
// step to a StepCollisionCounter; finish() returns, per order o and head k, over the lookups of that step:
//
//   lookups          N: the step's positions (one lookup per position, order and head)
//   distinct         D: distinct n-grams of order o among them (identity: memhash::ngram_key of the raw tokens)
//   touched_rows     distinct rows of head k the step reads
//   lookups_per_row  N / touched_rows
//   foreign_step     reading (a): share of the N lookups whose head-k row also receives a different n-gram in
//                    this step (the row's group of distinct n-grams in the step has >= 2 members)
//   foreign_owner    reading (b): the owner of a row is its most frequent n-gram so far in the run (running
//                    lookup counts over every step observed, this step included; ties keep the earlier owner);
//                    share of this step's touched head-k rows whose lookups include a non-owner n-gram.
//                    NaN when owners are not tracked. Counts start when the counter is built (a resumed run
//                    starts them again at the resume step).
//   shared_pairs     unordered pairs of the step's distinct n-grams that share their head-k row
//   co_heads         cross-head co-collision: over those pairs, the mean number of OTHER heads of the order in
//                    which the pair also shares a row (PageGram ~ (K-1)/S, Engram-style ~ 0); NaN without pairs
//                    or with one head per order (flat)
//   page_mates       PageGram only, per order: mean over the step's lookups of the number of other distinct
//                    n-grams of the step on the same page (NaN for other layouts)
//
// Serial and exact; everything is integer counting over key-sorted data, so the result does not depend on
// thread counts or on how the step was split into micro-batches. Memory: scratch of rows() int32 + the
// step's rows and keys; with owners, rows() x 12 bytes + an n-gram count map of ~17-34 bytes per distinct
// n-gram seen in the run (owner_bytes()).
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "memory/layout.h"
#include "memory/ngram.h"

namespace pg {

struct StepCollisionStats {
  int64_t n_orders = 0, heads_per_order = 0;
  // Per order.
  std::vector<int64_t> lookups, distinct;
  std::vector<double> page_mates;
  // Per (order, head), order-major: index o * heads_per_order + k.
  std::vector<int64_t> touched_rows, shared_pairs;
  std::vector<double> lookups_per_row, foreign_step, foreign_owner, co_heads;

  // The statistics in the order the run log stores them (/collisions/<name>, train/FORMATS.md): f(name, member
  // pointer, per_head). One list drives the log's read, truncate and write; a field added above and here is logged.
  template <class F>
  static void columns(F&& f) {
    f("lookups", &StepCollisionStats::lookups, false);
    f("distinct", &StepCollisionStats::distinct, false);
    f("page_mates", &StepCollisionStats::page_mates, false);
    f("touched_rows", &StepCollisionStats::touched_rows, true);
    f("lookups_per_row", &StepCollisionStats::lookups_per_row, true);
    f("foreign_step", &StepCollisionStats::foreign_step, true);
    f("foreign_owner", &StepCollisionStats::foreign_owner, true);
    f("shared_pairs", &StepCollisionStats::shared_pairs, true);
    f("co_heads", &StepCollisionStats::co_heads, true);
  }
};

class StepCollisionCounter {
 public:
  // The layout must outlive the counter. track_owners enables reading (b) (running counts).
  StepCollisionCounter(const MemoryLayout& layout, bool track_owners);

  // One micro-batch of the current step: rows [n, layout.heads()] (Addresses::rows), keys [n, n_orders]
  // (ngram_key of each order at each position).
  void add(const int64_t* rows, const uint64_t* keys, int64_t n);
  // Ends the step: updates the owners (when tracked) and, when `report`, returns the statistics of the
  // lookups added since the last finish() (otherwise an empty StepCollisionStats).
  StepCollisionStats finish(bool report = true);

  bool tracks_owners() const { return track_owners_; }
  // Bytes held for reading (b): owner arrays + n-gram count map.
  int64_t owner_bytes() const;

 private:
  // Open-addressing map n-gram key -> lookups so far (one per order); key 0 is stored aside.
  struct CountMap {
    std::vector<uint64_t> keys;
    std::vector<uint32_t> counts;
    int64_t size = 0;
    uint32_t zero_count = 0;
    uint32_t add(uint64_t key, uint32_t c);
    void grow();
  };

  const MemoryLayout& layout_;
  int64_t unit_rows_;  // rows per page (layouts with pages), 0 otherwise
  bool track_owners_;
  int64_t n_ = 0;
  std::vector<int64_t> rows_;  // [n, heads]
  std::vector<uint64_t> keys_;  // [n, n_orders]
  // Scratch.
  std::vector<int32_t> first_;  // per table row: first member of its group (-1 = none)
  std::vector<int32_t> next_, page_count_;
  std::vector<std::pair<uint64_t, int64_t>> sorted_;
  std::vector<uint64_t> dkey_;
  std::vector<int64_t> drow_;
  // Owners (reading b).
  std::vector<uint64_t> owner_key_;
  std::vector<uint32_t> owner_count_;
  std::vector<CountMap> counts_;
};

// The n-gram keys [n, n_orders] of the positions of B windows (starts[b] .. starts[b] + T - 1, window-major):
// the same positions as compute_window_addresses.
template <class Tok>
void compute_window_ngram_keys(const MemoryLayout& layout, std::span<const Tok> tokens,
                               std::span<const uint64_t> doc_offsets, std::span<const int64_t> starts, int64_t T,
                               std::vector<uint64_t>& keys);

// ---- Implementation of the template.
template <class Tok>
void compute_window_ngram_keys(const MemoryLayout& layout, std::span<const Tok> tokens,
                               std::span<const uint64_t> doc_offsets, std::span<const int64_t> starts, int64_t T,
                               std::vector<uint64_t>& keys) {
  const int64_t B = static_cast<int64_t>(starts.size()), mo = layout.max_order(), no = layout.n_orders();
  keys.resize(static_cast<size_t>(B * T * no));
  std::vector<uint64_t> ctx(static_cast<size_t>(T * mo));
  for (int64_t b = 0; b < B; ++b) {
    ngram_contexts(tokens, doc_offsets, starts[static_cast<size_t>(b)], T, mo, ctx.data());
    uint64_t* out = keys.data() + b * T * no;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t o = 0; o < no; ++o) out[i * no + o] = memhash::ngram_key(ctx.data() + i * mo, layout.orders()[o]);
  }
}
}  // namespace pg
