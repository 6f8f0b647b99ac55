// Implementation of train/config.h.
#include "train/config.h"

#include <cmath>

namespace pg {

int64_t TrainConfig::accum_steps(int64_t context) const {
  return tokens_per_step / (micro_batch * context);
}
int64_t TrainConfig::total_steps() const {
  if (steps > 0) return steps;
  return (tokens + tokens_per_step - 1) / tokens_per_step;
}
void TrainConfig::validate(const std::string& where, int64_t context) const {
  const int64_t per_micro = micro_batch * context;
  if (tokens_per_step % per_micro != 0)
    throw ConfigError(str(where, ": key 'train.tokens_per_step': ", tokens_per_step,
                          " is not a multiple of train.micro_batch * model.context = ", per_micro,
                          " (hint: e.g. ", std::max<int64_t>(1, tokens_per_step / per_micro) * per_micro, ")"));
  if (out_dir.empty())
    throw ConfigError(str(where, ": key 'train.out_dir' is empty (hint: a run directory such as runs/my_run)"));
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
