// TrainConfig: optimizer, schedule, batch, evaluation and checkpoint settings (docs/model.md §4), and
// ExperimentConfig, the whole resolved config of one run (data, tokenizer, model, memory, train).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/config.h"
#include "memory/config.h"
#include "model/config.h"

namespace pg {

struct TrainConfig {
  int64_t seed = 0;  // backbone init, memory init and data order all derive from it
  int64_t tokens = 60000000;  // token budget; steps = ceil(tokens / tokens_per_step) unless steps > 0
  int64_t steps = 0;  // explicit step count (overrides tokens when > 0)
  int64_t tokens_per_step = 131072;  // a multiple of micro_batch * context (gradient accumulation)
  int64_t micro_batch = 4;  // windows per forward/backward
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // matrices only
  double grad_clip = 1.0;  // global L2 norm of backbone (+ dense memory) gradients; 0 = off
  double warmup_frac = 0.05;  // WSD: linear warm-up share of steps
  double decay_frac = 0.2;  // WSD: linear decay to 0 over the last share of steps
  int64_t eval_interval = 0;  // steps between held-out evaluations (0 = only at the start and the end)
  int64_t eval_windows = 2048;  // validation windows used (≤ the fixed validation set)
  int64_t log_interval = 1;
  int64_t checkpoint_interval = 0;  // steps between checkpoints (0 = only at the end)
  int64_t threads = 0;  // OpenMP threads (0 = all allowed CPUs), pinned
  std::string out_dir = "runs/default";
  // GEMM precision (kernels/gemm.h): "fp32", or "bf16" (report: BF16 autocast) = GEMM operands rounded to bf16 and
  // accumulated in fp32; master weights, AdamW, norms, softmax, loss and the tables stay fp32. The config hash
  // leaves the key out at its default (sweep/spec.cpp), so fp32 runs keep their hashes.
  std::string precision = "fp32";
  // How data-parallel ranks hold the memory table (docs/mpi.md): "replicated" (every rank the whole table and its
  // optimizer state) or "rows" (rank r of R holds rows [N·r/R, N·(r+1)/R) and fetches the others' rows it reads).
  // The same bits either way: the config hash leaves the key out.
  std::string table_sharding = "replicated";

  template <class V>
  void visit(V& v) {
    v("seed", seed, "run seed (backbone init, memory init and data order)", cfg::Range{0, 9.0e15});
    v("tokens", tokens, "training token budget", cfg::Range{1, 1e13});
    v("steps", steps, "explicit step count; 0 derives it from tokens", cfg::Range{0, 1e9});
    v("tokens_per_step", tokens_per_step, "tokens per optimizer step (multiple of micro_batch*context)",
      cfg::Range{1, 1e9});
    v("micro_batch", micro_batch, "windows per forward/backward pass", cfg::Range{1, 4096});
    v("lr", lr, "peak AdamW learning rate", cfg::Range{0.0, 10.0});
    v("beta1", beta1, "AdamW beta1", cfg::Range{0.0, 0.999999});
    v("beta2", beta2, "AdamW beta2", cfg::Range{0.0, 0.999999});
    v("eps", eps, "AdamW epsilon", cfg::Range{0.0, 1.0});
    v("weight_decay", weight_decay, "decoupled weight decay on matrices", cfg::Range{0.0, 10.0});
    v("grad_clip", grad_clip, "global gradient-norm clip (0 = off)", cfg::Range{0.0, 1e6});
    v("warmup_frac", warmup_frac, "WSD warm-up share of steps", cfg::Range{0.0, 1.0});
    v("decay_frac", decay_frac, "WSD final linear decay share of steps", cfg::Range{0.0, 1.0});
    v("eval_interval", eval_interval, "steps between held-out evaluations (0 = start and end)", cfg::Range{0, 1e9});
    v("eval_windows", eval_windows, "validation windows per evaluation", cfg::Range{1, 1e7});
    v("log_interval", log_interval, "steps between log flushes", cfg::Range{1, 1e9});
    v("checkpoint_interval", checkpoint_interval, "steps between checkpoints (0 = end only)", cfg::Range{0, 1e9});
    v("threads", threads, "OpenMP threads (0 = all allowed CPUs)", cfg::Range{0, 1024});
    v("out_dir", out_dir, "run directory (checkpoint.h5, log.h5, config.yaml)");
    v("precision", precision,
      "fp32 | bf16 (bf16 GEMM operands, fp32 accumulation and master weights) | autocast (bf16, and the tensors "
      "PyTorch's BF16 autocast keeps in bf16 rounded to bf16)");
    v("table_sharding", table_sharding,
      "replicated (every data-parallel rank holds the whole memory table) | rows (each rank holds 1/R of its rows "
      "and their optimizer state; the same results)");
  }
  // The GEMM precision named by `precision` (validate() has checked it): bf16 GEMMs for bf16 and autocast.
  bool bf16() const { return precision == "bf16" || precision == "autocast"; }
  bool autocast() const { return precision == "autocast"; }
  int64_t accum_steps(int64_t context) const;  // micro-steps per optimizer step
  int64_t total_steps() const;
  void validate(const std::string& where, int64_t context) const;
};

struct ExperimentConfig {
  std::string name = "default";
  DataConfig data;
  TokenizerConfig tokenizer;
  ModelConfig model;
  MemoryConfig memory;
  TrainConfig train;

  template <class V>
  void visit(V& v) {
    v("name", name, "experiment name (for logs and reports)");
    v("data", data, "corpus, cache and splits");
    v("tokenizer", tokenizer, "sentencepiece tokenizer");
    v("model", model, "backbone shape");
    v("memory", memory, "hashed n-gram memory table");
    v("train", train, "optimizer, schedule, batch, evaluation");
  }
  // Cross-section checks (vocab sizes agree, batch divides, memory fits the model); ConfigError with keys.
  void validate(const std::string& where) const;
};

// Loads a config file with `base:` resolution and `--set` overrides, validates it. ConfigError on problems.
// Memory a training run of `cfg` needs, estimated from the config before anything is allocated (bytes): the
// backbone's parameters, gradients and AdamW moments, its activation arena (exact), and the memory table with its
// row-wise optimizer state and step buffers (approximate). `what` gets a one-line breakdown.
// One rank's share with `ranks` data-parallel ranks (the table's with train.table_sharding: rows).
int64_t estimate_training_bytes(const ExperimentConfig& cfg, std::string* what = nullptr, int ranks = 1);
// Throws ConfigError when the estimate for the ranks on this node exceeds the memory available now (hint: what
// to shrink, or to shard the table).
void check_fits_in_memory(const ExperimentConfig& cfg, const std::string& where, int ranks = 1, int ranks_on_node = 1);

ExperimentConfig load_experiment(const std::string& path, const std::vector<std::string>& overrides = {});
// Parses a resolved YAML text (as stored in checkpoints and logs).
ExperimentConfig parse_experiment(const std::string& yaml_text, const std::string& where);

}  // namespace pg
