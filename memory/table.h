// MemoryTable: one layout's fp32 table [rows, width] with its row-wise optimizer and the step's sparse
// gradient — the batch-level interface the trainer uses (address, lookup, accumulate, update, stats, save/load).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/h5.h"
#include "memory/layout.h"
#include "memory/ngram.h"
#include "memory/rowwise_optimizer.h"
#include "memory/sparse_grad.h"

namespace pg {

// A read-only look at a table's pending sparse gradient: sorted unique rows and their summed gradients.
struct PendingGrad {
  const SparseGrad* g;
  std::span<const int64_t> rows() const { return g->rows; }
  const float* values() const { return g->values.data(); }
  int64_t touched() const { return g->size(); }
};

struct TableStats {
  int64_t step = 0;  // last completed update
  int64_t rows = 0;  // table rows
  int64_t touched_last = 0;  // distinct rows updated by the last step
  int64_t touched_ever = 0;  // rows whose last-update step is > 0
  double rms = 0.0;  // sqrt(mean θ²) over the whole table
  double max_abs = 0.0;
  double mean_v = 0.0;  // mean second moment over touched rows
};

class MemoryTable {
 public:
  // The table starts all zero (docs/model.md §3 initialization).
  MemoryTable(std::unique_ptr<MemoryLayout> layout, RowwiseRmsSettings opt);
  const MemoryLayout& layout() const { return *layout_; }
  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  RowwiseRmsOptimizer& optimizer() { return opt_; }
  const RowwiseRmsOptimizer& optimizer() const { return opt_; }
  int64_t completed_step() const { return step_; }
  int64_t readout_width() const { return layout_->readout_width(); }

  // Rows read by `a` are brought to the end of the last completed step (replayed weight decay) so a lookup
  // sees what a dense update would have left. No-op when weight_decay is 0 (θ is then exact already).
  void catch_up(const Addresses& a);
  // out [a.n, readout_width()] (see gather_signed). Call catch_up(a) first when weight decay is on.
  void gather(const Addresses& a, float* out) const;
  // dout [a.n, readout_width()]: adds this micro-batch's sparse gradient to the pending gradient (pending + this,
  // row-wise; into an empty pending gradient it is moved, not added).
  void accumulate_grad(const Addresses& a, const float* dout);
  // The row-wise update of step t (1-based, > completed_step()) with the pending gradient; clears it.
  // The optimizer's lr schedule must be set.
  void apply_update(int64_t t);
  PendingGrad pending() const { return {&pending_}; }
  // The pending gradient itself, for the trainer's fixed-tree combination of micro-batches and ranks
  // (train/grad_tree.h): it may swap it out and put a merged one back (rows sorted and unique, this width).
  SparseGrad& pending_grad() { return pending_; }
  // Brings every row to the end of the last completed step (before export, quantization or inspection).
  void materialize();

  TableStats stats() const;

  // Group contents: attributes = layout identity (hash version, seed, geometry), "completed_step";
  // datasets "table" [rows, width], "hash_seeds" [n_orders, heads_per_order, 3], optimizer "v", "last".
  // load() refuses (IoError, one line) a group whose identity, seeds or shapes differ, or whose values are
  // not finite. No gradient may be pending on save.
  void save(const h5::Group& g) const;
  void load(const h5::Group& g);

 private:
  std::unique_ptr<MemoryLayout> layout_;
  std::vector<float> values_;
  RowwiseRmsOptimizer opt_;
  SparseGrad pending_, mb_grad_, merged_;
  SparseGradScratch scratch_;
  std::vector<int64_t> unique_;
  int64_t step_ = 0;
  int64_t touched_last_ = 0;
};

}  // namespace pg
