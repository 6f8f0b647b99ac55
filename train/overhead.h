// Memory-table overhead measured in one process: one backbone (weights and buffers shared by every variant)
// takes optimizer steps with each config in turn — every config once per round, the order rotated from round to
// round — so the variants of one round run seconds apart and a slow phase of a shared machine hits them alike.
// Each step is what the trainer does (micro-batches of random tokens with the memory's prepare, forward/backward, grad norm,
// AdamW, table update) without logging, evaluation or checkpoints.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/memory_injector.h"

namespace pg {

struct OverheadVariant {
  std::string name;                 // the config's name
  std::string layout;               // memory.layout ("none" for the baseline)
  std::vector<double> step_seconds; // one per timed round
  MemoryPhaseTimes phases;          // summed over the timed rounds (zeros without memory)
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

}  // namespace pg
