// Implementation of train/trained_model.h.
#include "train/trained_model.h"

namespace pg {

TrainedModel load_trained_model(const std::string& checkpoint, const TrainedModelOptions& opt) {
  TrainedModel t;
  ExperimentConfig cfg = checkpoint_config(checkpoint);
  if (opt.link) cfg.train.table_sharding = "rows";  // the same results (docs/mpi.md)
  if (opt.open_data || (cfg.memory.enabled() && cfg.memory.hash.engram_faithful))
    t.data = std::make_unique<data::DataSet>(data::open_dataset(cfg.data, cfg.tokenizer));
  t.session = std::make_unique<Session>(cfg, SessionOptions{.optimizer = false,
                                                            .tokenizer = t.data ? t.data->tokenizer.get() : nullptr,
                                                            .micro_batch = opt.micro_batch,
                                                            .link = opt.link,
                                                            .table_rows = opt.table_rows});
  t.session->load(checkpoint);
  if (t.mem() && opt.table_ready && opt.table_rows)
    t.mem()->table().materialize();  // replayed decay up to the last step
  return t;
}

}  // namespace pg
