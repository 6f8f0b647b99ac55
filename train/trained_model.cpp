// Implementation of train/trained_model.h.
#include "train/trained_model.h"

#include "train/adamw.h"
#include "train/trainer.h"

namespace pg {

TrainedModel load_trained_model(const std::string& checkpoint, const TrainedModelOptions& opt) {
  TrainedModel t;
  t.cfg = checkpoint_config(checkpoint);
  const ExperimentConfig& cfg = t.cfg;
  if (opt.open_data || (cfg.memory.enabled() && cfg.memory.hash.engram_faithful))
    t.data = std::make_unique<data::DataSet>(data::open_dataset(cfg.data, cfg.tokenizer));
  t.model = std::make_unique<Transformer>(cfg.model, cfg.train.micro_batch);
  t.mem = attach_memory(cfg, *t.model, t.data ? t.data->tokenizer.get() : nullptr);
  if (t.mem) {  // the table's decay is replayed with the run's schedule (also when rows are only read: eval)
    const int64_t total = cfg.train.total_steps();
    const TrainConfig tc = cfg.train;
    t.mem->set_lr_schedule([tc, total](int64_t s) { return wsd_lr(s - 1, total, tc.lr, tc.warmup_frac, tc.decay_frac); });
  }
  SectionReader load_mem;
  if (t.mem) load_mem = [&](const h5::Group& g) { t.mem->load(g); };
  t.state = load_checkpoint(checkpoint, *t.model, nullptr, load_mem);
  if (t.mem && opt.table_ready) t.mem->table().materialize();  // replayed decay up to the last step
  return t;
}

}  // namespace pg
