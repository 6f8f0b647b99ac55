// MemoryInjector: the n-gram memory as a ResidualInjector of the Transformer (docs/model.md §3): it owns the layout's
// table (+ row-wise optimizer) and the dense memory parameters (W_V, W_K, gates, gate norms) with gradients.
//
// Per micro-batch:  prepare(store tokens, doc offsets, window starts, T)  -> addresses + e_t, once
//                   model forward  -> inject_forward(layer) at each injected layer (x += g_j e_t, or context gate)
//                   model backward -> inject_backward(layer); the last (lowest) layer also accumulates dW_V, dW_K
//                                     and the table's sparse gradient.
// Per step t:       dense_params() go through the trainer's grad clip + AdamW (gates and norms: no decay);
//                   step_table(t) applies the row-wise update (outside clipping); zero_dense_grads().
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/h5.h"
#include "core/schedule.h"
#include "memory/config.h"
#include "memory/normalize.h"
#include "memory/readout.h"
#include "memory/step_collisions.h"
#include "memory/table.h"
#include "train/adamw.h"
#include "train/table_shards.h"

#include "model/transformer.h"

namespace pg {

// Cheap per-step statistics (no pass over the table; table().stats() scans the whole table).
struct MemoryInjectorStats {
  std::vector<double> gates;  // scalar gates g_j (scalar mode)
  std::vector<double> mean_alpha;  // mean α_t per injected layer over the last forward (context modes)
  int64_t touched_rows = 0;  // distinct rows with a pending gradient (before step_table)
  int64_t completed_step = 0;  // last table update
};

// Wall-clock seconds spent in each phase of the memory's work since the last reset_phase_times() (for the
// benchmark's breakdown of the table overhead; a few steady-clock reads per micro-batch, always on).
struct MemoryPhaseTimes {
  double address = 0;  // n-gram hashing -> row addresses (+ the optimizer's catch-up of those rows)
  double gather = 0;  // signed row gathers into u
  double project = 0;  // e = W_V u (and k = W_K u)
  double inject = 0;  // gate forward + backward at every injected layer (+ zeroing their gradient buffers)
  double project_back = 0;  // du = W_Vᵀ de and dW_V (and W_K)
  double table_grad = 0;  // sparse row gradient accumulation
  double table_update = 0;  // row-wise optimizer step
  double collisions = 0;  // collision statistics for the run log (not the memory's own work: not in total())
  double total() const { return address + gather + project + inject + project_back + table_grad + table_update; }
};

class MemoryInjector : public ResidualInjector {
 public:
  // Builds layout (registry), zero table, and the dense parameters from RngStream(seed, "memory.init"),
  // independent of the backbone's streams. cfg must be enabled and validated. vocab: Engram-faithful only.
  // shard_link (train.table_sharding: rows, more than one rank): this process holds only its rows of the table
  // (train/table_shards.h); prepare(), evaluation and save() are then collective over the link's ranks.
  // hold_rows false: the table holds no rows (an empty shard: its layout, optimizer settings and schedule only), for
  // a caller that streams the saved rows itself (export: MemoryTable::read_saved_rows).
  MemoryInjector(const MemoryConfig& cfg, int64_t d_model, int64_t layers, uint64_t seed,
                 const CompressedVocab* vocab = nullptr, double norm_eps = 1e-6, PeerLink* shard_link = nullptr,
                 bool hold_rows = true);

  // ---- Per micro-batch. window_starts[b] is the position in the token store of window b ([T+1] tokens);
  // the memory reads positions start .. start+T-1 (the inputs), N = B*T rows, window-major.
  void prepare(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
               std::span<const int64_t> window_starts, int64_t T);
  void prepare(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
               std::span<const int64_t> window_starts, int64_t T);
  void prepare(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
               std::span<const int64_t> window_starts, int64_t T);

  // ---- Inference (infer/): e_t from rows read elsewhere (a table file). u [N, readout width] as gather_signed
  // leaves them (signed rows, heads summed or side by side); the next inject_forward calls (N rows) use them. No
  // backward may follow.
  void prepare_gathered(std::span<const float> u, int64_t N);

  // ---- Collision statistics of training steps (memory.collision_stats; memory/step_collisions.h). After a
  // training micro-batch's prepare(), observe_collisions() with the same arguments records its lookups
  // (evaluation batches are not observed); finish_collisions() ends the step. Results are unchanged: only the
  // addresses are read. Without memory.collision_stats both do nothing and finish returns empty statistics.
  void observe_collisions(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
                          std::span<const int64_t> window_starts, int64_t T);
  void observe_collisions(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
                          std::span<const int64_t> window_starts, int64_t T);
  void observe_collisions(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
                          std::span<const int64_t> window_starts, int64_t T);
  // The same for windows this process did not prepare (a data-parallel rank observes the other ranks'
  // micro-batches too): their addresses are computed here, nothing else.
  void observe_collisions_of(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T);
  void observe_collisions_of(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T);
  void observe_collisions_of(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T);
  StepCollisionStats finish_collisions(bool report);
  const StepCollisionCounter* collision_counter() const { return collisions_.get(); }

  bool injects(int64_t layer) const override { return layer_slot(layer) >= 0; }
  void inject_forward(int64_t layer, float* x, int64_t N) override;
  void inject_backward(int64_t layer, float* dx, int64_t N) override;

  // ---- Per step.
  // Dense memory parameters as named views into one allocation (W_V and W_K decayed; gates and norms not).
  std::vector<ParamView> dense_params();
  // All dense gradients as one span (the views of dense_params() lie inside it).
  std::span<float> dense_grads() { return grads_; }
  void zero_dense_grads();
  // The backbone's schedule; the table uses it times memory.lr_mult.
  void set_schedule(const LrSchedule& backbone);
  void step_table(int64_t t);

  MemoryInjectorStats stats() const;
  const MemoryPhaseTimes& phase_times() const { return times_; }
  void reset_phase_times() { times_ = {}; }
  void restore_phase_times(const MemoryPhaseTimes& t) { times_ = t; }  // e.g. to leave an evaluation out
  MemoryTable& table() { return *table_; }
  const MemoryTable& table() const { return *table_; }
  const MemoryConfig& config() const { return cfg_; }
  // The memory vector e_t [N, C] of the last prepare() (W_V-projected, or the flat signed sum).
  std::span<const float> memory_vector() const { return {e_ptr(), static_cast<size_t>(N_ * C_)}; }

  // Group: table (sub-group "table"), dense parameter values ("dense/<name>"), attributes gate and layers.
  // A sharded table: every rank first writes its shard file (table().save_shard), then rank 0 calls save with the
  // files' names (MemoryTable::save); every rank calls load (each reads its own rows).
  void save(const h5::Group& g, const SavedShards* shards = nullptr);
  void load(const h5::Group& g);
  // The table's row exchange (null unless sharded) and its traffic since the last reset.
  TableShards* shards() { return shards_.get(); }
  ExchangeStats& shard_exchange() { return shard_x_; }
  const ExchangeStats& shard_exchange() const { return shard_x_; }

 private:
  template <class Tok>
  void prepare_impl(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets,
                    std::span<const int64_t> window_starts, int64_t T);
  template <class Tok>
  void observe_impl(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets,
                    std::span<const int64_t> window_starts, int64_t T, bool prepared);
  int64_t layer_slot(int64_t layer) const;
  void project();  // e = W_V u (and k = W_K u) for the N_ rows of u_
  void gather_sharded();  // u_ from rows fetched from their owners
  void finish_backward();
  bool projected() const { return !table_->layout().sums_heads(); }
  bool context() const { return cfg_.gate != "scalar"; }
  const float* e_ptr() const { return projected() ? e_.data() : u_.data(); }
  struct View {
    size_t off, n;
  };

  MemoryConfig cfg_;
  int64_t C_, D_;  // model width, readout width
  double norm_eps_;
  readout::GateForm form_;
  std::unique_ptr<MemoryTable> table_;
  // Dense parameters and gradients (one allocation each) and their views.
  std::vector<float> params_, grads_;
  View wv_{0, 0}, wk_{0, 0}, gates_{0, 0}, norm_h_{0, 0}, norm_k_{0, 0};
  // The dense parameters, named once: f(name, view, weight decay) in checkpoint order. The name is the dataset
  // memory/dense/<name> of a checkpoint and the optimizer's "memory.<name>".
  template <class F>
  void for_each_dense(F&& f) const {
    f("w_v", wv_, true);
    f("w_k", wk_, true);
    f("gates", gates_, false);
    f("gate_norm_h", norm_h_, false);
    f("gate_norm_k", norm_k_, false);
  }
  // Micro-batch state.
  Addresses addr_;
  int64_t N_ = 0;
  std::vector<float> u_, e_, k_, du_, de_, dk_;
  readout::ProjectionScratch<float> proj_;
  std::vector<std::vector<float>> h_save_, alpha_;
  int64_t backward_done_ = 0;
  MemoryPhaseTimes times_;
  std::unique_ptr<StepCollisionCounter> collisions_;  // null without memory.collision_stats
  std::vector<uint64_t> keys_;
  Addresses obs_addr_;  // observe_collisions_of
  // Sharded tables: the rows a micro-batch reads (sorted, unique), fetched from their owners, and the addresses
  // into them.
  std::unique_ptr<TableShards> shards_;
  ExchangeStats shard_x_;
  std::vector<int64_t> wanted_;
  std::vector<float> fetched_;
  Addresses local_addr_;
};

}  // namespace pg
