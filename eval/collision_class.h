// Held-out loss split by the collision class of each position's n-grams (the analysis the report
// only implies). For a trained checkpoint: replay the run's training windows (the trainer's sampler, same seed, up
// to the checkpoint's sampler counter) into a RowOccupancy (memory/row_occupancy.h), then evaluate the validation
// windows and put every position's loss, per order o, into one of three classes:
//   clean  no head of order o reads a row that received another n-gram in training
//   some   1 .. K-1 heads do
//   all    all K heads do (flat: K = 1, so a position is clean or all)
// and, because over a whole run at the report's regime nearly every row is shared, the same three classes under the
// owner reading (the run log's foreign_owner): a head counts when its row's most frequent training n-gram is another
// one (owned: the n-gram owns its row in every head; some; none: another n-gram owns every one of its rows).
// Positions whose n-gram is not complete (the first o-1 of a document) count as their class like any other: their
// key is the truncated n-gram the table was trained with.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/trained_model.h"

namespace pg {

struct CollisionClassRow {
  int64_t order = 0;
  int64_t heads_per_order = 0;
  std::array<int64_t, 3> positions{};  // clean, some, all
  std::array<double, 3> loss_sum{};  // nats, summed over the class's positions
  std::array<int64_t, 3> owner_positions{};  // owner reading: owned in every head, some, none
  std::array<double, 3> owner_loss_sum{};
  double mean(int c) const { return positions[c] ? loss_sum[c] / static_cast<double>(positions[c]) : 0.0; }
  double share(int c) const;
  double owner_mean(int c) const {
    return owner_positions[c] ? owner_loss_sum[c] / static_cast<double>(owner_positions[c]) : 0.0;
  }
  double owner_share(int c) const;
};

struct CollisionClassReport {
  std::string layout;  // "engram", "pagegram(S=4)", ...
  int64_t train_windows = 0;  // training windows replayed
  int64_t rows = 0, touched_rows = 0, shared_rows = 0;
  int64_t windows = 0, positions = 0;  // validation windows and positions evaluated
  double mean_loss = 0;  // over every position (equals `pagegram eval` over the same windows)
  std::vector<CollisionClassRow> orders;
};

// `tm` must hold its dataset (TrainedModelOptions::open_data) and a memory table. n: validation windows (<= 0:
// all). UserError for a checkpoint without a table.
CollisionClassReport loss_by_collision_class(TrainedModel& tm, int64_t n,
                                             const std::function<void(int64_t, int64_t)>& progress = {});

std::string format_collision_class_table(const CollisionClassReport& r);

}  // namespace pg
