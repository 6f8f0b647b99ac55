// Implementation of train/config.h.
#include "train/config.h"
#include "model/transformer.h"
#include "core/sysinfo.h"
#include "core/text.h"
#include <cstdio>
#include <fstream>

#include <cmath>

namespace pg {

int64_t TrainConfig::accum_steps(int64_t context) const { return tokens_per_step / (micro_batch * context); }
int64_t TrainConfig::total_steps() const {
  if (steps > 0) return steps;
  return (tokens + tokens_per_step - 1) / tokens_per_step;
}
void TrainConfig::validate(const std::string& where, int64_t context) const {
  const int64_t per_micro = micro_batch * context;
  if (tokens_per_step % per_micro != 0)
    throw ConfigError(str(where, ": key 'train.tokens_per_step': ", tokens_per_step,
                          " is not a multiple of train.micro_batch * model.context = ", per_micro, " (hint: e.g. ",
                          std::max<int64_t>(1, tokens_per_step / per_micro) * per_micro, ")"));
  if (out_dir.empty())
    throw ConfigError(str(where, ": key 'train.out_dir' is empty (hint: a run directory such as runs/my_run)"));
  if (precision != "fp32" && precision != "bf16" && precision != "autocast")
    throw ConfigError(
        str(where, ": key 'train.precision': '", precision, "' is not a precision (hint: fp32, bf16 or autocast)"));
  if (table_sharding != "replicated" && table_sharding != "rows")
    throw ConfigError(str(where, ": key 'train.table_sharding': '", table_sharding,
                          "' is not a sharding (hint: replicated or rows)"));
  if (warmup_frac + decay_frac > 1.0)
    throw ConfigError(str(where, ": keys 'train.warmup_frac' + 'train.decay_frac' exceed 1 (hint: WSD needs ",
                          "warm-up + decay <= all steps)"));
}

void ExperimentConfig::validate(const std::string& where) const {
  model.validate(where);
  train.validate(where, model.context);
  memory.validate(where, model.d_model, model.layers);
  if (tokenizer.vocab_size != model.vocab)
    throw ConfigError(str(where, ": key 'model.vocab' (", model.vocab, ") differs from 'tokenizer.vocab_size' (",
                          tokenizer.vocab_size, ") (hint: set both to the same size)"));
  // Every run evaluates (at least at its end): a mean over no window would be NaN and the run would look finished.
  if (data.val_tokens < model.context + 1)
    throw ConfigError(str(where, ": key 'data.val_tokens' (", data.val_tokens, ") holds no validation window of ",
                          "model.context + 1 = ", model.context + 1,
                          " tokens (hint: data.val_tokens >= (model.context + ", "1) x train.eval_windows)"));
}

namespace {
std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}
}  // namespace

int64_t estimate_training_bytes(const ExperimentConfig& cfg, std::string* what, int ranks) {
  const double params = static_cast<double>(Transformer::count_params(cfg.model));
  const double backbone = 16.0 * params;  // fp32 parameters, gradients, AdamW m and v
  const double acts = static_cast<double>(Transformer::activation_bytes(cfg.model, cfg.train.micro_batch));
  double table = 0;
  if (cfg.memory.layout != "none") {
    const double P = static_cast<double>(cfg.memory.target_params);
    const double rows = P / static_cast<double>(std::max<int64_t>(1, cfg.memory.head_dim));
    const double lookups = static_cast<double>(cfg.train.micro_batch * cfg.model.context) *
                           static_cast<double>(cfg.memory.orders.size() * cfg.memory.heads);
    // table + per-row optimizer state (v, last step) + one micro-batch's gathered rows and their gradients (x3)
    // (sharded by rows: the table and its state split over the ranks)
    const double held = cfg.train.table_sharding == "rows" ? 1.0 / std::max(1, ranks) : 1.0;
    table = held * (4.0 * P + 8.0 * rows) + 3.0 * 4.0 * lookups * static_cast<double>(cfg.memory.head_dim);
  }
  const double total = backbone + acts + table;
  if (what)
    *what = str("backbone ", gib(backbone), " GiB (", format_count(params), " parameters x 16 bytes), activations ",
                gib(acts), " GiB, memory table ", gib(table), " GiB");
  return static_cast<int64_t>(total);
}

void check_fits_in_memory(const ExperimentConfig& cfg, const std::string& where, int ranks, int ranks_on_node) {
  std::string what;
  const int64_t per_rank = estimate_training_bytes(cfg, &what, ranks);
  const int local = std::max(1, ranks_on_node);
  const int64_t need = per_rank * local;
  const int64_t have = available_memory_bytes();
  if (have > 0 && need > have) {
    const bool shardable = local > 1 && cfg.train.table_sharding != "rows" && cfg.memory.layout != "none";
    throw ConfigError(str(where, ": this run needs about ", gib(static_cast<double>(need)), " GiB",
                          local > 1 ? str(" (", local, " ranks on this node x ", gib(static_cast<double>(per_rank)),
                                          " GiB each: ", what, ")")
                                    : str(" (", what, ")"),
                          " but ", gib(static_cast<double>(have)), " GiB are available (hint: ",
                          shardable ? "train.table_sharding=rows gives each rank 1/R of the table; or " : "",
                          "lower train.micro_batch, model.vocab/d_model/layers or memory.target_params)"));
  }
}

ExperimentConfig load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node node = cfg::load_file(path, overrides);
  ExperimentConfig c = cfg::from_yaml<ExperimentConfig>(node, path);
  c.validate(path);
  return c;
}

ExperimentConfig parse_experiment(const std::string& yaml_text, const std::string& where) {
  const YAML::Node node = cfg::parse_text(yaml_text, where);
  ExperimentConfig c = cfg::from_yaml<ExperimentConfig>(node, where);
  c.validate(where);
  return c;
}

}  // namespace pg
