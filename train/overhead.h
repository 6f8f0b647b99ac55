// Memory-table overhead measured in one process: one Session per config (train/session.h, the same backbone
// initialization) takes optimizer steps in turn — every config once per round, the order rotated from round to
// round — so the variants of one round run seconds apart and a slow phase of a shared machine hits them alike.
// Each step is Session::step, what the trainer does (micro-batches of random tokens with the memory's prepare,
// forward/backward, grad norm, clip, AdamW, table update) at a small constant learning rate, without logging,
// evaluation or checkpoints.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/memory_injector.h"

namespace pg {

struct OverheadVariant {
  std::string name;  // the config's name
  std::string layout;  // memory.layout ("none" for the baseline)
  std::vector<double> step_seconds;  // one per timed round
  MemoryPhaseTimes phases;  // summed over the timed rounds (zeros without memory)
};

struct OverheadResult {
  int64_t tokens_per_step = 0;
  int threads = 0;
  std::vector<OverheadVariant> variants;  // in the order of the configs; [0] is the baseline
  int64_t peak_rss_kb = 0;
};

// cfgs[0] is the baseline (usually memory.layout none); all must share the model section, micro_batch and
// tokens_per_step (ConfigError naming the first config that differs). `warmup` untimed rounds fault in every
// buffer. on_round(r) is called after each round (progress); may be empty.
OverheadResult measure_overhead(const std::vector<ExperimentConfig>& cfgs, int64_t rounds, int64_t warmup,
                                const std::function<void(int64_t)>& on_round = {});

// The median of `v` (the mean of the two middle values for an even count); 0 for an empty vector.
double median(std::vector<double> v);

// One row of `bench overhead`'s table: tokens/s and the overhead against the baseline (variants[0]), each as
// the median over rounds and its range; the overhead of round i is 1 - (baseline tok/s) / (this tok/s) in percent,
// both from round i, so a slow phase of the machine cancels.
struct OverheadRow {
  double tok_s_median = 0, tok_s_min = 0, tok_s_max = 0;
  double overhead_median = 0, overhead_min = 0, overhead_max = 0;  // percent
  double seconds = 0;  // the timed steps summed
  double memory_share = 0;  // the memory's own work (phases) as a percent of `seconds`
};
std::vector<OverheadRow> overhead_rows(const OverheadResult& r);

}  // namespace pg
