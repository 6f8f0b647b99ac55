// A training session: the model, its memory table, the optimizers and the learning-rate schedule of one experiment
// config, with the run's state (step, tokens, data order). One object built from the config, used by everything
// that trains, evaluates, benchmarks, exports or serves a model, so the wiring below is written once:
//
//   Session s(cfg, {.tokenizer = ...});          // backbone init(seed), memory init(seed), AdamW, schedule
//   s.load("run/checkpoint.h5");                 // or a fresh start
//   StepStats st = s.step(*ds.train, sampler);   // accum micro-batches -> clip -> AdamW -> table update
//   double l = s.evaluate(val, n, *ds.heldout);  // held-out mean cross-entropy (nats)
//   s.save("run/checkpoint.h5");
//
// The schedule is plain data (core/schedule.h): the backbone uses it as is, the table times memory.lr_mult.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "data/pipeline.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/grad_tree.h"
#include "train/memory_injector.h"

namespace pg {

struct SessionOptions {
  bool optimizer = true;  // allocate AdamW moments (false: evaluation, export, generation)
  const data::Tokenizer* tokenizer = nullptr;  // needed by Engram-faithful hashing (its compressed vocabulary)
  int64_t micro_batch = 0;  // windows per forward pass (0: train.micro_batch)
  // Data-parallel ranks (train/dist.h; nullptr = one process): this session computes its rank's block of each
  // step's micro-batches and the ranks complete the gradient tree together (train/grad_tree.h). The number of
  // ranks must be a power of two dividing train.accum_steps() (ConfigError otherwise).
  PeerLink* link = nullptr;
  // false: the memory table holds none of its rows (export streams them from the checkpoint; the session can then
  // neither train nor evaluate with the table).
  bool table_rows = true;
};

// What one optimizer step did.
struct StepStats {
  double loss = 0.0;  // mean training loss over the step's micro-batches (nats)
  double grad_norm = 0.0;  // global gradient norm before clipping
  double lr = 0.0;  // backbone learning rate of the step
  MemoryInjectorStats memory;  // before the table update (rows touched this step); empty without memory
  StepCollisionStats collisions;  // when StepOptions::observe_collisions
};

struct StepOptions {
  bool observe_collisions = false;  // record the step's lookups (memory.collision_stats)
  bool report_collisions = false;  // ... and return their statistics in StepStats::collisions
};

// The learning-rate schedule of a run (WSD over train.total_steps()).
LrSchedule schedule_of(const TrainConfig& tc);
// True when two configs give the same results: equal but for the thread count and run directory (bit-identical
// for any of them) and the run-log collision statistics switches (they only read addresses).
bool same_results(ExperimentConfig a, ExperimentConfig b);

class Session {
 public:
  // Validates the config, builds and initializes everything from train.seed (no files read).
  explicit Session(const ExperimentConfig& cfg, const SessionOptions& opt = {});
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // One optimizer step (docs/model.md §4) on windows drawn by `sampler` from `store`: forward/backward over
  // train.accum_steps() micro-batches, each into zeroed gradients, summed in the fixed tree of train/grad_tree.h
  // (with ranks: this rank's contiguous block, then the exchanges), global-norm clip, AdamW at
  // schedule().lr(step + 1), the table's row-wise update; then state().step, tokens and sampler_counter advance.
  // Every rank draws every window start, so the data order does not depend on the ranks. Needs the optimizer.
  StepStats step(const data::TokenStore& store, data::WindowSampler& sampler, const StepOptions& opt = {});

  // Mean cross-entropy (nats) over the first n validation windows (all of them when n <= 0); the memory's
  // addresses come from the held-out store. The memory phase timers are left as they were (they time training).
  // `progress` (optional) is called after each micro-batch with the windows done and the total.
  double evaluate(const data::ValidationWindows& val, int64_t n, const data::TokenStore& heldout,
                  const std::function<void(int64_t, int64_t)>& progress = {});

  // Checkpoint (train/checkpoint.h): parameters, AdamW moments (when held), the table and its optimizer, state().
  // Rank 0 writes the file. With the table sharded by rows every rank must call save: each writes its rows to a
  // shard file of this save (train/checkpoint.h table_shard_path), then rank 0 the checkpoint that maps them, and
  // removes the shard files no checkpoint maps any more: of the checkpoint it replaces too unless keep_previous
  // (they stay until the next save, for a reader of that checkpoint). Otherwise only the rank that writes calls it.
  void save(const std::string& path, bool keep_previous = true);
  // The table is sharded by rows over the ranks (train.table_sharding: rows, more than one rank).
  bool table_sharded() const { return mem_ && mem_->shards(); }
  // Loads a checkpoint written for this config's shapes (the caller checks same_results() when it matters);
  // moments only when this session holds an optimizer. Sets state().
  void load(const std::string& path);

  const ExperimentConfig& config() const { return cfg_; }
  const LrSchedule& schedule() const { return schedule_; }
  Transformer& model() { return *model_; }
  const Transformer& model() const { return *model_; }
  MemoryInjector* memory() { return mem_.get(); }
  const MemoryInjector* memory() const { return mem_.get(); }
  AdamW* optimizer() { return adamw_.get(); }
  TrainState& state() { return st_; }
  const TrainState& state() const { return st_; }
  // Parameters and optimizer moments all finite (checked before a checkpoint is written).
  bool finite() const;
  // Data-parallel ranks (1 without a link) and this session's rank.
  int ranks() const { return link_ ? link_->size() : 1; }
  int rank() const { return link_ ? link_->rank() : 0; }
  // Time and bytes of the gradient exchanges (and of a sharded table's row fetches) since the last reset (zeros
  // for one rank).
  ExchangeStats exchange_stats() const;
  void reset_exchange_stats();
  // Benchmarks: a synchronizing 8-byte exchange before each step's gradient exchange, timed apart as
  // ExchangeStats::wait_seconds, so the rest measures the transfer and additions, not the ranks' imbalance.
  void set_measure_exchange(bool on) { measure_exchange_ = on; }
  // Extra bytes the gradient tree holds (saved left halves, exchange scratch), after the first step.
  int64_t tree_bytes() const;

 private:
  // The parts of step(), in order. The micro-batch `a` of this step: windows, memory addresses, forward and backward
  // into the (zeroed) gradients; its loss into node_loss_.
  void micro_batch(const data::TokenStore& store, int64_t a, bool observe);
  // The gradient tree's two moves: keep the current node's sums in slot d; add slot d (left) to the current (right).
  void save_node(int d);
  void combine_node(int d);
  // The tree's top levels across ranks, and the collision observation of every micro-batch in order.
  void reduce_across_ranks(const data::TokenStore& store, bool observe);
  // Clipping and AdamW at step t; then the memory's statistics, table update and collision statistics.
  void update_backbone(int64_t t, StepStats& out);
  void update_memory(int64_t t, bool observe, bool report_collisions, StepStats& out);

  ExperimentConfig cfg_;
  LrSchedule schedule_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<MemoryInjector> mem_;
  std::unique_ptr<AdamW> adamw_;
  TrainState st_;
  std::vector<int32_t> windows_;
  std::vector<int64_t> starts_, all_starts_;
  // The gradient tree: saved left halves (one per tree level below this rank's block) and exchange scratch.
  struct Slot {
    std::vector<float> model, memory;
    SparseGrad table;
    double loss = 0;
  };
  std::vector<Slot> slots_;
  double node_loss_ = 0.0;  // the loss of the tree's current node
  SparseGrad merged_, recv_;
  std::vector<float> scratch_;
  std::vector<std::byte> bytes_;
  PeerLink* link_ = nullptr;
  ExchangeStats xstats_;
  bool measure_exchange_ = false;
};

// ConfigError unless `ranks` data-parallel ranks can split the micro-batches of cfg's steps (a power of two
// that divides train.accum_steps()).
void check_ranks(const ExperimentConfig& cfg, int ranks);

// Builds the memory injector of cfg (nullptr for layout "none"), attaches it to the model and gives it the
// run's schedule. The tokenizer is needed for Engram-faithful hashing and may be null otherwise.
// shard_link: the ranks a table sharded by rows is spread over (train.table_sharding: rows; else ignored).
std::unique_ptr<MemoryInjector> attach_memory(const ExperimentConfig& cfg, Transformer& model,
                                              const data::Tokenizer* tokenizer = nullptr,
                                              PeerLink* shard_link = nullptr, bool hold_rows = true);

// Session::evaluate for a model and memory held elsewhere (the memory already set on the model).
double evaluate(Transformer& model, const data::ValidationWindows& val, int64_t n, const data::TokenStore& heldout,
                MemoryInjector* mem = nullptr, const std::function<void(int64_t, int64_t)>& progress = {});

// The backbone's parameters as named AdamW views (parameter + gradient), in buffer order.
std::vector<ParamView> backbone_views(Transformer& model);

}  // namespace pg
