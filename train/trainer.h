// The training run (docs/model.md §4) read top to bottom: a Session (train/session.h) takes the steps; this file adds
// the run directory (lock, resume checks), the log, evaluation cadence, divergence rule and checkpoints.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/pipeline.h"
#include "model/transformer.h"
#include "train/config.h"
#include "train/memory_injector.h"
#include "train/session.h"

namespace pg {

struct TrainOptions {
  bool resume = false;  // continue from <out_dir>/checkpoint.h5 if it exists
  bool force = false;  // replace another config's run in out_dir, or start over where a resume cannot resume
  std::string command;  // recorded in the log
  int64_t stop_after = -1;  // stop (with a checkpoint) after this many steps of this call; -1 = run to the end
  bool progress = true;  // progress line on stderr
  bool write_files = true;  // false: no log/checkpoint (benchmarks)
  int64_t untimed_steps = 0;  // leading steps of this call left out of train_tok_per_s (warm-up)
  // Data-parallel ranks (train/dist.h world_link(); nullptr = one process). Every rank computes its block of each
  // step's micro-batches and holds the whole model and table; rank 0 alone writes the run directory (lock, log,
  // checkpoints, config.yaml) and shows progress. Every rank evaluates (evaluation reads table rows, which brings
  // them up to date: the replicas must stay bit-identical).
  PeerLink* link = nullptr;
  bool measure_exchange = false;  // split the exchange time into waiting for the partner and transfer (benchmarks)
};

struct TrainSummary {
  int64_t start_step = 0, steps_done = 0, total_steps = 0, tokens = 0;
  double first_eval = 0.0, final_eval = 0.0;  // held-out loss (nats) at the first and last evaluation
  double seconds = 0.0;  // wall time of this call
  double train_tok_per_s = 0.0;  // training tokens / training seconds (evaluation excluded)
  double train_seconds = 0.0;  // seconds of the timed steps (after TrainOptions::untimed_steps)
  std::vector<double> step_seconds;  // each timed step's seconds, in order (they sum to train_seconds)
  MemoryPhaseTimes memory_times;  // the memory's share of train_seconds, by phase (no memory: zeros)
  double final_train_loss = 0.0;
  int64_t peak_rss_kb = 0;
  std::vector<int64_t> rank_peak_rss_kb;  // every rank's peak RSS, on rank 0 (ranks > 1)
  std::string table_sharding;  // train.table_sharding of the run
  int64_t collision_owner_bytes = 0;  // memory held for Foreign reading (b) (memory.collision_owners)
  int ranks = 1, rank = 0;  // data-parallel ranks and this process's rank
  ExchangeStats exchange;  // gradient exchanges of the timed steps (ranks > 1)
  int64_t tree_bytes = 0;  // extra bytes of the gradient tree (saved halves, exchange scratch)
  int64_t dense_grad_floats = 0;  // backbone + memory dense gradients (what a step's dense exchange sums)
  int64_t touched_rows = 0;  // table rows with a gradient in the last step (its sparse exchange)
  int64_t table_width = 0;  // floats per table row (0 without a table)
  std::string out_dir;
};

TrainSummary train(const ExperimentConfig& cfg, const data::DataSet& ds, const TrainOptions& opt);

// Peak resident set size of this process (kB), from /proc/self/status.
int64_t peak_rss_kb();

}  // namespace pg
