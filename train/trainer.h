// The training loop (SPEC §4) read top to bottom: sample windows, forward/backward with gradient
// accumulation, clip, AdamW + WSD, table update, log, evaluate, checkpoint; plus held-out evaluation.
#pragma once
#include <functional>
#include <cstdint>
#include <memory>
#include <string>

#include "data/pipeline.h"
#include "model/transformer.h"
#include "train/config.h"
#include "train/memory_injector.h"

namespace pg {

struct TrainOptions {
  bool resume = false;       // continue from <out_dir>/checkpoint.h5 if it exists
  std::string command;       // recorded in the log
  int64_t stop_after = -1;   // stop (with a checkpoint) after this many steps of this call; -1 = run to the end
  bool progress = true;      // progress line on stderr
  bool write_files = true;   // false: no log/checkpoint (benchmarks)
  int64_t untimed_steps = 0; // leading steps of this call left out of train_tok_per_s (warm-up)
};

struct TrainSummary {
  int64_t start_step = 0, steps_done = 0, total_steps = 0, tokens = 0;
  double first_eval = 0.0, final_eval = 0.0;  // held-out loss (nats) at the first and last evaluation
  double seconds = 0.0;                       // wall time of this call
  double train_tok_per_s = 0.0;               // training tokens / training seconds (evaluation excluded)
  double train_seconds = 0.0;                 // seconds of the timed steps (after TrainOptions::untimed_steps)
  MemoryPhaseTimes memory_times;              // the memory's share of train_seconds, by phase (no memory: zeros)
  double final_train_loss = 0.0;
  int64_t peak_rss_kb = 0;
  int64_t collision_owner_bytes = 0;  // memory held for Foreign reading (b) (memory.collision_owners)
  std::string out_dir;
};

TrainSummary train(const ExperimentConfig& cfg, const data::DataSet& ds, const TrainOptions& opt);

class MemoryInjector;
// Mean cross-entropy (nats) over the first n validation windows (all of them when n <= 0). With a memory
// injector (already set on the model), each micro-batch's addresses come from the held-out store.
// `progress` (optional) is called after each micro-batch with the windows done and the total.
double evaluate(Transformer& model, const data::ValidationWindows& val, int64_t n, const data::TokenStore& heldout,
                MemoryInjector* mem = nullptr, const std::function<void(int64_t, int64_t)>& progress = {});
// Builds the memory injector of cfg (nullptr for layout "none") and attaches it to the model. The tokenizer
// is needed for Engram-faithful hashing (its compressed vocabulary) and may be null otherwise.
std::unique_ptr<MemoryInjector> attach_memory(const ExperimentConfig& cfg, Transformer& model,
                                              const data::Tokenizer* tokenizer = nullptr);

// The backbone's parameters as named AdamW views (parameter + gradient), in buffer order.
std::vector<ParamView> backbone_views(Transformer& model);

// Peak resident set size of this process (kB), from /proc/self/status.
int64_t peak_rss_kb();

}  // namespace pg
