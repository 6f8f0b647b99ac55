// A trained model read back from its checkpoint: a Session (train/session.h) without optimizer moments, with its
// memory table attached: what `pagegram eval` evaluates, `pagegram export` writes as a table file and generation
// serves (the storage/ tools never include train/, so this is here).
#pragma once
#include <memory>
#include <string>

#include "data/pipeline.h"
#include "train/session.h"

namespace pg {

struct TrainedModel {
  std::unique_ptr<Session> session;  // the checkpoint's config, parameters, table and state
  std::unique_ptr<data::DataSet> data;  // null unless opened (see TrainedModelOptions)

  const ExperimentConfig& cfg() const { return session->config(); }
  Transformer& model() { return session->model(); }
  MemoryInjector* mem() { return session->memory(); }
  const MemoryInjector* mem() const { return session->memory(); }
  const TrainState& state() const { return session->state(); }
};

struct TrainedModelOptions {
  bool open_data = false;  // open the config's dataset (held-out windows); also opened when Engram-faithful hashing
                           // needs the tokenizer
  bool table_ready = false;  // replay the table's decay up to the last step (materialize), as exported
  int64_t micro_batch = 0;  // windows per forward pass (0: the config's train.micro_batch)
  bool table_rows = true;  // false: the table's rows are not read (export streams them: read_saved_rows)
  // Ranks (train/dist.h; nullptr = one process): the table is sharded by rows over them (each loads its rows) and
  // evaluation is collective, whatever train.table_sharding the checkpoint was trained with.
  PeerLink* link = nullptr;
};

// Builds the session of the checkpoint's config and loads it (no optimizer moments).
TrainedModel load_trained_model(const std::string& checkpoint, const TrainedModelOptions& opt);

}  // namespace pg
