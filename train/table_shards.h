// A memory table sharded by rows over the data-parallel ranks (train.table_sharding: rows; docs/mpi.md "Tables
// sharded by rows"). Rank r of R holds rows [rows·r/R, rows·(r+1)/R) of the table and of its row-wise optimizer
// state (memory/table.h, shard_of); the rest is fetched from the owners when a micro-batch reads it:
//
//   fetch:  the micro-batch's sorted unique rows, split by owner; with each other rank (partner r ^ k, k = 1..R-1)
//           the counts, then the requested row ids, then the rows (caught up to the last completed step by their
//           owner) are exchanged: one round of pairwise exchanges per micro-batch, batched by owner.
//   grads:  the step's sparse gradient goes to the owners through tree_reduce_scatter (train/grad_tree.h), in the
//           fixed tree's order; each rank updates its own rows (catch-up and updates stay local).
//   save:   each rank writes its rows to a shard file of its own, named by the step (Session::save,
//           MemoryTable::save_shard); once every rank has, rank 0 writes the checkpoint, whose table datasets map the
//           shard files' rows (HDF5 virtual datasets): read through it, a sharded run's checkpoint holds the
//           replicated run's values bit for bit, and it loads with any rank count and either sharding.
//
// Every function here is collective: every rank of the link calls it, in the same order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "memory/table.h"
#include "train/grad_tree.h"

namespace pg {

// bounds[q] .. bounds[q+1]: the rows rank q holds (R + 1 values).
std::vector<int64_t> shard_bounds(int64_t rows, int ranks);

class TableShards {
 public:
  TableShards(PeerLink& link, int64_t rows);
  int ranks() const { return link_.size(); }
  int rank() const { return link_.rank(); }
  std::span<const int64_t> bounds() const { return bounds_; }

  // out [rows.size(), t.layout().width()]: the rows `rows` (global, sorted and unique) of the whole table, as of the
  // end of the last completed step. t is this rank's shard.
  void fetch(MemoryTable& t, std::span<const int64_t> rows, float* out, ExchangeStats* st = nullptr);
  // The step's sparse gradient of this rank's micro-batches (global rows) becomes the whole step's gradient of the
  // rows this rank holds.
  void reduce_gradient(SparseGrad& g, ExchangeStats* st = nullptr);
  // x = the sum over ranks in the tree's order (exact for counts).
  void sum(double& x, ExchangeStats* st = nullptr) { tree_allreduce(link_, x, st); }

 private:
  PeerLink& link_;
  std::vector<int64_t> bounds_;
  std::vector<int64_t> theirs_;  // rows another rank asks this rank for
  std::vector<float> reply_;
  SparseGrad recv_, out_;
  std::vector<std::byte> buf_;
};

}  // namespace pg
