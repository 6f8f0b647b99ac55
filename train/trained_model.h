// A trained model read back from its checkpoint, with its memory table attached: what `pagegram eval` evaluates
// and `pagegram export` writes as a table file (the storage/ tools never include train/, so this is here).
#pragma once
#include <memory>
#include <string>

#include "data/pipeline.h"
#include "model/transformer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/memory_injector.h"

namespace pg {

struct TrainedModel {
  ExperimentConfig cfg;                   // the checkpoint's resolved config
  std::unique_ptr<Transformer> model;
  std::unique_ptr<MemoryInjector> mem;    // null without a memory table
  std::unique_ptr<data::DataSet> data;    // null unless opened (see load_trained_model)
  TrainState state;                       // step, tokens, ...
};

struct TrainedModelOptions {
  bool open_data = false;    // open the config's dataset (held-out windows); also opened when Engram-faithful hashing needs the tokenizer
  bool table_ready = false;  // give the table the run's WSD schedule and replay its decay up to the last step (materialize), as exported
};

// Builds the model and memory of the checkpoint's config and loads both (no optimizer moments).
TrainedModel load_trained_model(const std::string& checkpoint, const TrainedModelOptions& opt);

}  // namespace pg
