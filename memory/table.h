// MemoryTable: one layout's fp32 table [rows, width] with its row-wise optimizer and the step's sparse
// gradient — the batch-level interface the trainer uses (address, lookup, accumulate, update, stats, save/load).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
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

// The rows [lo, hi) of a table one process holds when the table is sharded by rows over data-parallel ranks
// (train.table_sharding: rows); rank r of R holds [rows·r/R, rows·(r+1)/R) (shard_of).
struct RowRange {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
  bool contains(int64_t row) const { return row >= lo && row < hi; }
};
RowRange shard_of(int64_t rows, int ranks, int rank);

// A table sharded by rows is saved by its owners: each shard writes its rows and their optimizer state to a file of
// its own (MemoryTable::save_shard; format in memory/README.md, "Saved table"), and the checkpoint's table
// group maps those files' rows into its datasets (HDF5 virtual datasets, so a reader sees the whole table).
inline constexpr const char* kTableShardFormat = "pagegram-table-shard";
inline constexpr int64_t kTableShardFormatVersion = 1;
struct SavedShards {
  std::string save_id;  // one save's identity, in every shard file and the group that maps them
  std::vector<std::string> files;  // shard q's file, relative to the checkpoint's folder
  std::vector<int64_t> bounds;  // shard q holds rows [bounds[q], bounds[q + 1])
};

// The shard file names a sharded table's group lists (relative to the folder of its file; empty for a whole table).
std::vector<std::string> saved_shard_names(const h5::Group& g);
// The folder those names are relative to, for a group in `file`: the file's own folder, or its target's when `file`
// is a symlink.
std::string saved_shards_folder(const std::string& file);

// The rows of a table as MemoryTable::save left it in a group, read range by range without holding the rest: a
// whole table's datasets, or the shard files a sharded table's group maps. The files are opened and checked when
// this is built (each present, of the shard format, of this save (save_id), step, row range and shape; IoError
// naming the file otherwise, so a checkpoint never loads a mix of two saves) and read from while open (a file the
// next save of a running training removes still reads). It holds its own handle on `g` (and so its file).
class SavedTable {
 public:
  SavedTable(const h5::Group& g, int64_t rows, int64_t width);
  int64_t completed_step() const { return step_; }
  // Rows [r0, r0 + n): table [n, width], optimizer v [n] and last [n], validated (finite values, a valid optimizer
  // state: IoError naming the row).
  void read(int64_t r0, int64_t n, float* table, float* v, int32_t* last) const;

 private:
  h5::Group g_;
  int64_t rows_, width_, step_;
  std::string where_;
  std::vector<int64_t> bounds_;  // a sharded table: shard q's rows (R + 1 values); empty: a whole table in g_
  std::vector<h5::File> files_;
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
  // The table starts all zero (docs/model.md §3 initialization). `shard`: the rows this process holds (default:
  // all); the others are held by other ranks (train/table_shards.h fetches them and routes their gradients).
  MemoryTable(std::unique_ptr<MemoryLayout> layout, RowwiseRmsSettings opt, std::optional<RowRange> shard = {});
  RowRange shard() const { return shard_; }
  bool whole() const { return shard_.lo == 0 && shard_.hi == layout_->rows(); }
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
  // out [a.n, readout_width()] (see gather_signed). Call catch_up(a) first when weight decay is on. Whole tables.
  void gather(const Addresses& a, float* out) const;
  // out [rows.size(), width]: the held rows `rows` (global indices inside shard(), sorted and unique), brought to
  // the end of the last completed step first (as catch_up does): what a sharded table sends to a rank that reads them.
  void read_rows(std::span<const int64_t> rows, float* out);
  // dout [a.n, readout_width()]: adds this micro-batch's sparse gradient to the pending gradient (pending + this,
  // row-wise; into an empty pending gradient it is moved, not added).
  void accumulate_grad(const Addresses& a, const float* dout);
  // The row-wise update of step t (1-based, > completed_step()) with the pending gradient; clears it.
  // The optimizer's lr schedule must be set. A shard's pending gradient holds only its own rows (global indices).
  void apply_update(int64_t t);
  PendingGrad pending() const { return {&pending_}; }
  // The pending gradient itself, for the trainer's fixed-tree combination of micro-batches and ranks
  // (train/grad_tree.h): it may swap it out and put a merged one back (rows sorted and unique, this width).
  SparseGrad& pending_grad() { return pending_; }
  // Brings every row to the end of the last completed step (before export, quantization or inspection).
  void materialize();

  // Of the rows held (a shard's statistics for a sharded table).
  TableStats stats() const;

  // Group contents: attributes = layout identity (hash version, seed, geometry), "completed_step";
  // datasets "table" [rows, width], "hash_seeds" [n_orders, heads_per_order, 3], optimizer "v", "last".
  // load() refuses (IoError, one line) a group whose identity, seeds or shapes differ, or whose values are
  // not finite. No gradient may be pending on save. A whole table writes its rows into g. A sharded table's
  // owners first write their shard files (save_shard, every shard, one save id); then one of them checks them
  // (check_shards) and calls save with their names, which maps them into g's datasets. A shard loads its own rows
  // only, from a group any number of shards (or one process) wrote (SavedTable checks the shard files it maps).
  void save(const h5::Group& g, const SavedShards* shards = nullptr) const;
  // This shard's rows and optimizer state to `path` (written atomically; a new file) as part of save `save_id`.
  void save_shard(const std::string& path, const std::string& save_id) const;
  // IoError unless every shard file of `shards`, in folder `dir`, is there and holds that shard's rows of this table
  // as of this step and save (what save will map).
  void check_shards(const SavedShards& shards, const std::string& dir) const;
  void load(const h5::Group& g);
  // out [n, width]: rows [r0, r0 + n) of the saved table `s`, brought to the end of its completed step as
  // materialize() brings them, without holding the rest: what export streams from a checkpoint whose table need not
  // fit this process. The same layout, settings and schedule as this table's (it may hold no rows).
  void read_saved_rows(const SavedTable& s, int64_t r0, int64_t n, float* out) const;

 private:
  std::unique_ptr<MemoryLayout> layout_;
  RowRange shard_;
  std::vector<float> values_;  // [shard_.size(), width]
  RowwiseRmsOptimizer opt_;
  SparseGrad pending_, mb_grad_, merged_;
  SparseGradScratch scratch_;
  std::vector<int64_t> unique_, local_;
  int64_t step_ = 0;
  int64_t touched_last_ = 0;
};

}  // namespace pg
