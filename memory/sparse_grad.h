// Signed row gather (the lookup T[row] ⊙ s) and its sparse backward: sorted unique rows plus summed values,
// built by sort then segmented reduce so the bits never depend on the thread count (STYLE.md).
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "memory/ngram.h"

namespace pg {

// out [a.n, readout]: multi-head (sums_heads false) out[i, h*w + j] = s_{i,h}[j] T[row_{i,h}, j], readout = heads*w;
// flat (sums_heads true) out[i, j] = Σ_h s_{i,h}[j] T[row_{i,h}, j] (summed in head order), readout = w.
void gather_signed(const Addresses& a, const float* table, int64_t width, bool sums_heads, float* out);

// A sparse table gradient: sorted unique rows and their summed gradients [rows.size(), width].
struct SparseGrad {
  int64_t width = 0;
  std::vector<int64_t> rows;
  std::vector<float> values;
  int64_t size() const { return static_cast<int64_t>(rows.size()); }
};

// Reusable buffers of sparse_grad (allocate once, reuse every micro-batch).
struct SparseGradScratch {
  std::vector<uint64_t> keys, tmp;  // (row << 32 | entry), radix-sorted
  std::vector<std::pair<int64_t, int64_t>> order;  // (row, entry): the std::sort path for huge tables/batches
  std::vector<int64_t> segments;  // first entry of each row's run, + end
};

// The gradient of gather_signed w.r.t. the table: entry (i, h) adds s_{i,h} ⊙ dout[i, h-slice] (flat: the whole
// dout row) to row_{i,h}. Entries are sorted by (row, i*heads + h) (a stable radix sort by row when rows and
// entries fit 32 bits, else std::sort of pairs: the same order) and each row's entries summed in that order.
void sparse_grad(const Addresses& a, const float* dout, int64_t width, bool sums_heads, SparseGrad& out,
                 SparseGradScratch& scratch);

// out = a + b for two sparse gradients of one table (width equal; rows sorted and unique in each): the sorted
// union of their rows, a row held by both getting a[j] + b[j] (one float addition per element: the fixed tree of
// micro-batches and ranks, train/grad_tree.h, is built from these). out must not alias a or b; its buffers are
// reused. Deterministic for any thread count.
void merge_sparse(const SparseGrad& a, const SparseGrad& b, SparseGrad& out);

// Dense reference (for tests): scatter-adds every entry serially into dense [rows, width].
void dense_grad_reference(const Addresses& a, const float* dout, int64_t width, bool sums_heads, float* dense);

// Sums the sparse gradients of the micro-batches of one step. One int32 slot per table row (-1 = untouched);
// a new row is appended in the order of the added gradient's sorted rows, a known row is added to in
// micro-batch order. Deterministic for any thread count.
class SparseGradAccumulator {
 public:
  SparseGradAccumulator(int64_t rows, int64_t width);
  // Adds g. Into an empty accumulator (the first micro-batch of a step) g's buffers are taken by a swap instead
  // of copied: g is then left with no rows and this accumulator's old buffers (capacity kept for reuse).
  void add(SparseGrad& g);
  // Touched rows in first-touch order, and their summed gradients [touched(), width] in the same order.
  std::span<const int64_t> rows() const { return rows_; }
  const float* values() const { return values_.data(); }
  int64_t touched() const { return static_cast<int64_t>(rows_.size()); }
  void clear();

 private:
  int64_t width_;
  std::vector<int32_t> slot_;
  std::vector<int64_t> rows_;
  std::vector<float> values_;  // at least touched() * width; never shrunk (no re-fill of recycled buffers)
  std::vector<int32_t> dst_;  // scratch of add(): destination slot per added row
  std::vector<uint8_t> fresh_;
};

}  // namespace pg
