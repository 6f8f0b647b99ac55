// Which n-grams each row of a table received over a run, for the held-out loss split by collision class (classes:
// "no foreign n-gram in its rows / foreign in some heads / foreign in all heads"). Fed with the addresses and n-gram
// keys of every training position (the trainer's windows, replayed); asked, for a held-out position, in how many
// heads of an order its row received an n-gram other than its own during training.
//
// A row of head (o, k) is foreign to n-gram g when training put some n-gram other than g into it. Rows that training
// never touched are not foreign (the n-gram reads a row nobody wrote). Over a whole run at the report's regime
// (~300 lookups per row) nearly every row is shared, so a second reading follows the run log's foreign_owner: a row's
// owner is the n-gram that trained it most often (running counts; ties keep the earlier), and a row is foreign to g
// when its owner is another n-gram. Memory: rows() x 21 bytes + ~24 bytes per distinct n-gram of the run.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "memory/layout.h"

namespace pg {

class RowOccupancy {
 public:
  explicit RowOccupancy(const MemoryLayout& layout);

  // One batch of training positions: rows [n, heads()] (Addresses::rows, heads order-major h = o * K + k), keys
  // [n, n_orders] (compute_window_ngram_keys).
  void add(const int64_t* rows, const uint64_t* keys, int64_t n);

  // For one position (its rows [heads()] and its order-o key): the number of heads k of order o whose row is
  // foreign to the key, in [0, heads_per_order()].
  int64_t foreign_heads(const int64_t* rows_of_position, uint64_t key, int64_t order) const;
  // The same under the owner reading: heads whose row is owned by another n-gram (an untouched row: none).
  int64_t non_owner_heads(const int64_t* rows_of_position, uint64_t key, int64_t order) const;
  // Rows that received at least one n-gram, and rows that received two or more distinct n-grams.
  int64_t touched_rows() const;
  int64_t shared_rows() const;

 private:
  const MemoryLayout& layout_;
  std::vector<uint64_t> first_;  // [rows]: the first n-gram key the row received
  std::vector<uint8_t> state_;  // [rows]: 0 untouched, 1 one n-gram so far, 2 several
  std::vector<uint64_t> owner_;  // [rows]: the row's most frequent n-gram so far
  std::vector<uint32_t> owner_count_;
  std::vector<std::unordered_map<uint64_t, uint32_t>> count_;  // per order: lookups of each n-gram so far
};

}  // namespace pg
