// Implementation of train/memory_injector.h.
#include "train/memory_injector.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/timer.h"

namespace pg {

MemoryInjector::MemoryInjector(const MemoryConfig& cfg, int64_t d_model, int64_t layers, uint64_t seed,
                               const CompressedVocab* vocab, double norm_eps, PeerLink* shard_link, bool hold_rows)
    : cfg_(cfg), C_(d_model), norm_eps_(norm_eps) {
  PG_CHECK(cfg.enabled(), "MemoryInjector for memory.layout = none");
  cfg.validate("memory injector", d_model, layers);
  form_ = cfg.gate == "context_sqrt" ? readout::GateForm::kSignedSqrt : readout::GateForm::kSigmoid;
  std::unique_ptr<MemoryLayout> layout = make_layout(cfg, d_model, vocab);
  std::optional<RowRange> shard;
  if (shard_link && shard_link->size() > 1) {
    shards_ = std::make_unique<TableShards>(*shard_link, layout->rows());
    shard = shard_of(layout->rows(), shard_link->size(), shard_link->rank());
  }
  if (!hold_rows) shard = RowRange{0, 0};
  table_ =
      std::make_unique<MemoryTable>(std::move(layout), RowwiseRmsSettings{cfg.beta2, cfg.eps, cfg.weight_decay}, shard);
  D_ = table_->readout_width();
  const int64_t L = static_cast<int64_t>(cfg.inject_layers.size());
  size_t off = 0;
  auto take = [&](size_t n) {
    View v{off, n};
    off += n;
    return v;
  };
  if (projected()) wv_ = take(static_cast<size_t>(C_ * D_));
  if (context()) {
    wk_ = take(static_cast<size_t>(C_ * D_));
    norm_h_ = take(static_cast<size_t>(L * C_));
    norm_k_ = take(static_cast<size_t>(L * C_));
  } else {
    gates_ = take(static_cast<size_t>(L));
  }
  params_.assign(off, 0.0f);
  grads_.assign(off, 0.0f);
  // docs/model.md §3: W_V orthogonal with gain sqrt(2d / (2Kr)) — generalized to sqrt(2d / D), D = n_orders K r;
  // W_K likewise (gain 1 for the flat layout, whose W_K is d x d); stream independent of the backbone's.
  const RngStream init(seed, "memory.init");
  const double gain = std::sqrt(2.0 * static_cast<double>(C_) / static_cast<double>(D_));
  if (wv_.n) readout::orthogonal_init(params_.data() + wv_.off, C_, D_, gain, init.child("w_v"));
  if (wk_.n) readout::orthogonal_init(params_.data() + wk_.off, C_, D_, projected() ? gain : 1.0, init.child("w_k"));
  for (size_t i = 0; i < gates_.n; ++i) params_[gates_.off + i] = static_cast<float>(cfg.gate_init);
  for (size_t i = 0; i < norm_h_.n; ++i) params_[norm_h_.off + i] = 1.0f;
  for (size_t i = 0; i < norm_k_.n; ++i) params_[norm_k_.off + i] = 1.0f;
  h_save_.resize(static_cast<size_t>(L));
  alpha_.resize(static_cast<size_t>(L));
  if (cfg.collision_stats) collisions_ = std::make_unique<StepCollisionCounter>(table_->layout(), cfg.collision_owners);
}

int64_t MemoryInjector::layer_slot(int64_t layer) const {
  for (size_t j = 0; j < cfg_.inject_layers.size(); ++j)
    if (cfg_.inject_layers[j] == layer) return static_cast<int64_t>(j);
  return -1;
}

template <class Tok>
void MemoryInjector::prepare_impl(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets,
                                  std::span<const int64_t> window_starts, int64_t T) {
  PG_CHECK(backward_done_ == 0 || backward_done_ == static_cast<int64_t>(cfg_.inject_layers.size()),
           "prepare() during an unfinished backward pass");
  backward_done_ = 0;
  Timer t;
  compute_window_addresses(table_->layout(), tokens, doc_offsets, window_starts, T, addr_);
  N_ = addr_.n;
  if (!shards_) table_->catch_up(addr_);
  times_.address += t.seconds();
  t.reset();
  u_.resize(static_cast<size_t>(N_ * D_));
  if (shards_) gather_sharded();
  else table_->gather(addr_, u_.data());
  times_.gather += t.seconds();
  t.reset();
  project();
  times_.project += t.seconds();
  t.reset();
  if (context()) dk_.assign(static_cast<size_t>(N_ * C_), 0.0f);
  de_.assign(static_cast<size_t>(N_ * C_), 0.0f);  // the gates' backward passes add into de (and dk)
  times_.inject += t.seconds();
}

void MemoryInjector::gather_sharded() {
  const int64_t entries = addr_.n * addr_.heads, w = table_->layout().width();
  wanted_.assign(addr_.rows.begin(), addr_.rows.begin() + entries);
  std::sort(wanted_.begin(), wanted_.end());
  wanted_.erase(std::unique(wanted_.begin(), wanted_.end()), wanted_.end());
  fetched_.resize(wanted_.size() * static_cast<size_t>(w));
  shards_->fetch(*table_, wanted_, fetched_.data(), &shard_x_);
  // The same addresses, into the fetched rows: the gather reads the same values in the same order.
  local_addr_.n = addr_.n, local_addr_.heads = addr_.heads, local_addr_.sign_words = addr_.sign_words;
  local_addr_.signs = addr_.signs;
  local_addr_.rows.resize(static_cast<size_t>(entries));
#pragma omp parallel for schedule(static) if (entries > 65536)
  for (int64_t i = 0; i < entries; ++i)
    local_addr_.rows[static_cast<size_t>(i)] =
        std::lower_bound(wanted_.begin(), wanted_.end(), addr_.rows[static_cast<size_t>(i)]) - wanted_.begin();
  gather_signed(local_addr_, fetched_.data(), w, table_->layout().sums_heads(), u_.data());
}

void MemoryInjector::project() {
  if (projected()) {
    e_.resize(static_cast<size_t>(N_ * C_));
    readout::project_forward(e_.data(), u_.data(), params_.data() + wv_.off, N_, C_, D_, proj_);
  }
  if (context()) {
    k_.resize(static_cast<size_t>(N_ * C_));
    readout::project_forward(k_.data(), u_.data(), params_.data() + wk_.off, N_, C_, D_, proj_);
  }
}

void MemoryInjector::prepare_gathered(std::span<const float> u, int64_t N) {
  PG_CHECK(static_cast<int64_t>(u.size()) == N * D_, "prepare_gathered: ", u.size(), " values for ", N, " rows of ",
           D_);
  backward_done_ = 0;
  N_ = N;
  addr_.n = 0;  // no addresses: nothing to backpropagate into
  Timer t;
  u_.assign(u.begin(), u.end());
  project();
  times_.project += t.seconds();
}

void MemoryInjector::prepare(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T) {
  prepare_impl(tokens, doc_offsets, window_starts, T);
}
void MemoryInjector::prepare(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T) {
  prepare_impl(tokens, doc_offsets, window_starts, T);
}
void MemoryInjector::prepare(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
                             std::span<const int64_t> window_starts, int64_t T) {
  prepare_impl(tokens, doc_offsets, window_starts, T);
}

template <class Tok>
void MemoryInjector::observe_impl(std::span<const Tok> tokens, std::span<const uint64_t> doc_offsets,
                                  std::span<const int64_t> window_starts, int64_t T, bool prepared) {
  if (!collisions_) return;
  const Timer t;
  const Addresses* a = &addr_;
  if (prepared) {
    PG_CHECK(addr_.n == static_cast<int64_t>(window_starts.size()) * T,
             "observe_collisions() does not match the last prepare()");
  } else {
    compute_window_addresses(table_->layout(), tokens, doc_offsets, window_starts, T, obs_addr_);
    a = &obs_addr_;
  }
  compute_window_ngram_keys(table_->layout(), tokens, doc_offsets, window_starts, T, keys_);
  collisions_->add(a->rows.data(), keys_.data(), a->n);
  times_.collisions += t.seconds();
}
void MemoryInjector::observe_collisions(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
                                        std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, true);
}
void MemoryInjector::observe_collisions(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
                                        std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, true);
}
void MemoryInjector::observe_collisions(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
                                        std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, true);
}
void MemoryInjector::observe_collisions_of(std::span<const uint16_t> tokens, std::span<const uint64_t> doc_offsets,
                                           std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, false);
}
void MemoryInjector::observe_collisions_of(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_offsets,
                                           std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, false);
}
void MemoryInjector::observe_collisions_of(std::span<const int32_t> tokens, std::span<const uint64_t> doc_offsets,
                                           std::span<const int64_t> window_starts, int64_t T) {
  observe_impl(tokens, doc_offsets, window_starts, T, false);
}

StepCollisionStats MemoryInjector::finish_collisions(bool report) {
  if (!collisions_) return {};
  const Timer t;
  StepCollisionStats s = collisions_->finish(report);
  times_.collisions += t.seconds();
  return s;
}

void MemoryInjector::inject_forward(int64_t layer, float* x, int64_t N) {
  const int64_t j = layer_slot(layer);
  PG_CHECK(j >= 0, "layer ", layer, " is not a memory layer");
  PG_CHECK(N == N_, "inject_forward with ", N, " tokens after prepare() of ", N_);
  const Timer t;
  if (!context()) {
    readout::scalar_gate_forward(x, e_ptr(), params_[gates_.off + static_cast<size_t>(j)], N, C_);
    times_.inject += t.seconds();
    return;
  }
  auto& hs = h_save_[static_cast<size_t>(j)];
  auto& al = alpha_[static_cast<size_t>(j)];
  hs.resize(static_cast<size_t>(N * C_));
  al.resize(static_cast<size_t>(N));
  readout::context_gate_forward(x, hs.data(), al.data(), k_.data(), e_ptr(), params_.data() + norm_h_.off + j * C_,
                                params_.data() + norm_k_.off + j * C_, N, C_, norm_eps_, form_);
  times_.inject += t.seconds();
}

void MemoryInjector::inject_backward(int64_t layer, float* dx, int64_t N) {
  const int64_t j = layer_slot(layer);
  PG_CHECK(j >= 0, "layer ", layer, " is not a memory layer");
  PG_CHECK(N == N_, "inject_backward with ", N, " tokens after prepare() of ", N_);
  const Timer t;
  if (!context()) {
    readout::scalar_gate_backward(de_.data(), grads_.data() + gates_.off + j, dx, e_ptr(),
                                  params_[gates_.off + static_cast<size_t>(j)], N, C_);
  } else {
    readout::context_gate_backward(dx, dk_.data(), de_.data(), grads_.data() + norm_h_.off + j * C_,
                                   grads_.data() + norm_k_.off + j * C_, h_save_[static_cast<size_t>(j)].data(),
                                   k_.data(), e_ptr(), params_.data() + norm_h_.off + j * C_,
                                   params_.data() + norm_k_.off + j * C_, N, C_, norm_eps_, form_);
  }
  times_.inject += t.seconds();
  if (++backward_done_ == static_cast<int64_t>(cfg_.inject_layers.size())) finish_backward();
}

void MemoryInjector::finish_backward() {
  // de = dL/de_t summed over layers; dk = dL/dk_t. Back through W_V / W_K to the gathered rows u, then to the table.
  Timer t;
  const float* du_ptr = de_.data();  // flat without context gate: du = de
  if (projected() || context()) {
    du_.resize(static_cast<size_t>(N_ * D_));  // every element written below
    if (projected())
      readout::project_backward(du_.data(), false, grads_.data() + wv_.off, de_.data(), u_.data(),
                                params_.data() + wv_.off, N_, C_, D_, proj_);
    else std::memcpy(du_.data(), de_.data(), sizeof(float) * static_cast<size_t>(N_ * C_));
    if (context())
      readout::project_backward(du_.data(), true, grads_.data() + wk_.off, dk_.data(), u_.data(),
                                params_.data() + wk_.off, N_, C_, D_, proj_);
    du_ptr = du_.data();
  }
  times_.project_back += t.seconds();
  t.reset();
  table_->accumulate_grad(addr_, du_ptr);
  times_.table_grad += t.seconds();
}

std::vector<ParamView> MemoryInjector::dense_params() {
  std::vector<ParamView> v;
  for_each_dense([&](const char* name, const View& w, bool decay) {
    if (w.n) v.push_back(ParamView{str("memory.", name), params_.data() + w.off, grads_.data() + w.off, w.n, decay});
  });
  return v;
}

void MemoryInjector::zero_dense_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void MemoryInjector::set_schedule(const LrSchedule& backbone) {
  table_->optimizer().set_schedule(backbone.times(cfg_.lr_mult));
}

void MemoryInjector::step_table(int64_t t) {
  const Timer timer;
  table_->apply_update(t);
  times_.table_update += timer.seconds();
}

MemoryInjectorStats MemoryInjector::stats() const {
  MemoryInjectorStats s;
  s.touched_rows = table_->pending().touched();
  s.completed_step = table_->completed_step();
  for (size_t i = 0; i < gates_.n; ++i) s.gates.push_back(params_[gates_.off + i]);
  for (const auto& a : alpha_) {
    double m = 0;
    for (float x : a) m += x;
    s.mean_alpha.push_back(a.empty() ? 0.0 : m / static_cast<double>(a.size()));
  }
  return s;
}

namespace {
// memory.inject_layers as a checkpoint attribute: "0,4".
std::string inject_layers_text(const MemoryConfig& c) {
  std::string layers;
  for (size_t i = 0; i < c.inject_layers.size(); ++i) layers += (i ? "," : "") + std::to_string(c.inject_layers[i]);
  return layers;
}
}  // namespace

void MemoryInjector::save(const h5::Group& g, const SavedShards* shards) {
  g.set_attr("gate", cfg_.gate);
  g.set_attr("inject_layers", inject_layers_text(cfg_));
  table_->save(g.create("table"), shards);
  h5::Group d = g.create("dense");
  for_each_dense([&](const char* name, const View& w, bool) {
    if (w.n) d.write<float>(name, std::span<const float>(params_.data() + w.off, w.n), {static_cast<uint64_t>(w.n)});
  });
}

void MemoryInjector::load(const h5::Group& g) {
  const std::string where = g.file() + ":" + g.path();
  for (const auto& [k, v] :
       {std::pair<std::string, std::string>{"gate", cfg_.gate}, {"inject_layers", inject_layers_text(cfg_)}}) {
    const std::string saved = g.attr_string(k);
    if (saved != v)
      throw IoError(str(where, ": memory was saved with ", k, " = ", saved, ", this run has ", v,
                        " (hint: use the memory config the checkpoint was trained with)"));
  }
  table_->load(g.sub("table"));
  h5::Group d = g.sub("dense");
  for_each_dense([&](const char* name, const View& w, bool) {
    if (!w.n) return;
    d.read_into<float>(name, std::span<float>(params_.data() + w.off, w.n), {static_cast<uint64_t>(w.n)});
    for (size_t i = 0; i < w.n; ++i)
      if (!std::isfinite(params_[w.off + i]))
        throw IoError(str(where, "/dense/", name, ": non-finite value (hint: a diverged run or a corrupt file)"));
  });
}

}  // namespace pg
