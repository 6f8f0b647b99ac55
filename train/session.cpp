// Implementation of train/session.h.
#include "train/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/timer.h"
#include "memory/normalize.h"

namespace pg {

LrSchedule schedule_of(const TrainConfig& tc) {
  return LrSchedule{tc.lr, tc.total_steps(), tc.warmup_frac, tc.decay_frac, 1.0};
}

bool same_results(ExperimentConfig a, ExperimentConfig b) {
  a.train.threads = b.train.threads = 0;
  a.train.out_dir = b.train.out_dir = "";
  a.train.table_sharding = b.train.table_sharding;  // the same bits either way
  a.memory.collision_stats = b.memory.collision_stats;
  a.memory.collision_owners = b.memory.collision_owners;
  return cfg::equal(a, b);
}

std::unique_ptr<MemoryInjector> attach_memory(const ExperimentConfig& cfg, Transformer& model,
                                              const data::Tokenizer* tokenizer, PeerLink* shard_link, bool hold_rows) {
  if (cfg.memory.layout == "none") {
    model.set_injector(nullptr);
    return nullptr;
  }
  const auto vocab = engram_vocab(cfg.memory, tokenizer ? tokenizer->pieces() : std::vector<std::string>{});
  auto mem = std::make_unique<MemoryInjector>(cfg.memory, cfg.model.d_model, cfg.model.layers,
                                              static_cast<uint64_t>(cfg.train.seed), vocab.get(), cfg.model.norm_eps,
                                              cfg.train.table_sharding == "rows" ? shard_link : nullptr, hold_rows);
  mem->set_schedule(schedule_of(cfg.train));  // also when rows are only read: the table replays its decay
  model.set_injector(mem.get());
  return mem;
}

std::vector<ParamView> backbone_views(Transformer& model) {
  std::vector<ParamView> views;
  float* p = model.params().data();
  float* g = model.grads().data();
  for (const ParamInfo& pi : model.param_infos())
    views.push_back({pi.name, p + pi.offset, g + pi.offset, pi.size, pi.decay});
  return views;
}

namespace {
// Computes the memory's addresses and e_t for windows starting at `starts` in `store` (docs/model.md §3: n-grams are a
// function of the store position, never of the window start).
void prepare_memory(MemoryInjector& mem, const data::TokenStore& store, const std::vector<int64_t>& starts, int64_t T) {
  store.with_ids([&](auto ids) { mem.prepare(ids, store.doc_offsets(), starts, T); });
}
bool all_finite(std::span<const float> v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}
}  // namespace

double evaluate(Transformer& model, const data::ValidationWindows& val, int64_t n, const data::TokenStore& heldout,
                MemoryInjector* mem, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t total = (n <= 0 || n > val.count()) ? val.count() : n;
  const int64_t B = model.micro_batch(), T = model.config().context, W = T + 1;
  const gemm::PrecisionScope precision(model.precision());  // also the memory readout's GEMMs (prepare)
  std::vector<int32_t> buf(static_cast<size_t>(B * W));
  std::vector<int64_t> starts;
  double sum = 0.0;
  for (int64_t k = 0; k < total; k += B) {
    const int64_t b = std::min(B, total - k);
    val.windows(k, b, buf.data());
    if (mem) {
      starts.clear();
      for (int64_t i = 0; i < b; ++i) starts.push_back(static_cast<int64_t>(val.start(k + i)));
      prepare_memory(*mem, heldout, starts, T);
    }
    sum += model.forward_loss(buf.data(), b) * static_cast<double>(b);
    if (progress) progress(k + b, total);
  }
  return sum / static_cast<double>(total);
}

Session::Session(const ExperimentConfig& cfg, const SessionOptions& opt)
    : cfg_(cfg), schedule_(schedule_of(cfg.train)), link_(opt.link) {
  if (link_ && opt.optimizer) check_ranks(cfg, link_->size());
  if (link_ && !opt.optimizer && !is_power_of_two(link_->size()))  // evaluation splits no step: a power of two
    throw ConfigError(str(link_->size(), " ranks cannot shard a table (hint: a power of two: 1, 2, 4, 8, ...)"));
  const int64_t B = opt.micro_batch > 0 ? opt.micro_batch : cfg.train.micro_batch;
  model_ = std::make_unique<Transformer>(cfg.model, B);
  model_->init(static_cast<uint64_t>(cfg.train.seed));
  model_->set_precision(cfg.train.bf16() ? gemm::Precision::bf16 : gemm::Precision::fp32);
  model_->set_autocast(cfg.train.autocast());
  mem_ = attach_memory(cfg, *model_, opt.tokenizer, link_, opt.table_rows);
  if (opt.optimizer) {
    std::vector<ParamView> views = backbone_views(*model_);
    if (mem_)
      for (const ParamView& v : mem_->dense_params()) views.push_back(v);
    const TrainConfig& tc = cfg.train;
    adamw_ = std::make_unique<AdamW>(views, AdamWSettings{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  }
}

void check_ranks(const ExperimentConfig& cfg, int ranks) {
  const int64_t accum = cfg.train.accum_steps(cfg.model.context);
  if (ranks >= 1 && is_power_of_two(ranks) && accum % ranks == 0) return;
  throw ConfigError(str(ranks, " data-parallel ranks cannot split a step of ", accum,
                        " micro-batches (train.tokens_per_step ", cfg.train.tokens_per_step, " = ", accum, " x ",
                        cfg.train.micro_batch, " windows x ", cfg.model.context,
                        " tokens) (hint: the ranks must be a power of two that divides ", accum,
                        "; change the rank count, train.micro_batch or train.tokens_per_step)"));
}

StepStats Session::step(const data::TokenStore& store, data::WindowSampler& sampler, const StepOptions& opt) {
  PG_CHECK(adamw_, "Session::step without an optimizer");
  const gemm::PrecisionScope precision(model_->precision());  // the backbone's and the memory readout's GEMMs
  const int64_t T = cfg_.model.context, B = cfg_.train.micro_batch, accum = cfg_.train.accum_steps(T);
  const int64_t m = accum / ranks(), lo = rank() * m;  // this rank's block of micro-batches
  windows_.resize(static_cast<size_t>(B * (T + 1)));
  starts_.resize(static_cast<size_t>(B));
  const int64_t t = st_.step + 1;
  StepStats out;
  out.lr = schedule_.lr(t);
  // Every rank draws every start: the sampler's stream and counter do not depend on the ranks.
  all_starts_.resize(static_cast<size_t>(accum * B));
  for (int64_t& x : all_starts_) x = static_cast<int64_t>(sampler.next_start());
  const bool observe = mem_ && opt.observe_collisions;
  node_loss_ = 0.0;
  slots_.resize(static_cast<size_t>(tree_depth(m)));
  tree_reduce(
      lo, m, [&](int64_t a) { micro_batch(store, a, observe); }, [&](int d) { save_node(d); },
      [&](int d) { combine_node(d); });
  if (ranks() > 1) reduce_across_ranks(store, observe);
  out.loss = node_loss_ / static_cast<double>(accum);
  update_backbone(t, out);
  if (mem_) update_memory(t, observe, opt.report_collisions, out);
  st_.step = t;
  st_.tokens += cfg_.train.tokens_per_step;
  st_.sampler_counter = sampler.counter();
  return out;
}

void Session::micro_batch(const data::TokenStore& store, int64_t a, bool observe) {
  const int64_t T = cfg_.model.context, B = cfg_.train.micro_batch, accum = cfg_.train.accum_steps(T);
  for (int64_t b = 0; b < B; ++b) {
    starts_[static_cast<size_t>(b)] = all_starts_[static_cast<size_t>(a * B + b)];
    store.copy(static_cast<uint64_t>(starts_[static_cast<size_t>(b)]), static_cast<uint64_t>(T + 1),
               windows_.data() + b * (T + 1));
  }
  if (mem_) prepare_memory(*mem_, store, starts_, T);
  if (observe && ranks() == 1)
    store.with_ids([&](auto ids) { mem_->observe_collisions(ids, store.doc_offsets(), starts_, T); });
  model_->zero_grads();
  if (mem_) {
    mem_->zero_dense_grads();
    PG_CHECK(mem_->table().pending().touched() == 0, "a micro-batch started with a pending table gradient");
  }
  node_loss_ = model_->forward_backward(windows_.data(), B, 1.0f / static_cast<float>(accum));
}

void Session::save_node(int d) {
  Slot& s = slots_[static_cast<size_t>(d)];
  const std::span<float> g_model = model_->grads();
  s.model.assign(g_model.begin(), g_model.end());
  if (mem_) {
    const std::span<float> g_mem = mem_->dense_grads();
    s.memory.assign(g_mem.begin(), g_mem.end());
    std::swap(s.table, mem_->table().pending_grad()), mem_->table().pending_grad().rows.clear();
  } else {
    s.memory.clear();
  }
  s.loss = node_loss_;
}

void Session::combine_node(int d) {  // current = slot d (left) + current (right)
  Slot& s = slots_[static_cast<size_t>(d)];
  const auto add = [](const std::vector<float>& left, std::span<float> right) {
    const size_t n = right.size();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; ++i) right[i] = left[i] + right[i];
  };
  add(s.model, model_->grads());
  if (mem_) {
    add(s.memory, mem_->dense_grads());
    SparseGrad& cur = mem_->table().pending_grad();
    merge_sparse(s.table, cur, merged_);
    std::swap(cur, merged_);
  }
  node_loss_ = s.loss + node_loss_;
}

void Session::reduce_across_ranks(const data::TokenStore& store, bool observe) {
  const int64_t T = cfg_.model.context, B = cfg_.train.micro_batch, accum = cfg_.train.accum_steps(T);
  if (measure_exchange_) {
    const Timer w;
    double sync = 0;
    tree_allreduce(*link_, sync);  // not counted as traffic
    xstats_.wait_seconds += w.seconds();
    xstats_.seconds += w.seconds();
  }
  tree_allreduce(*link_, model_->grads(), scratch_, &xstats_);
  if (mem_ && !mem_->dense_grads().empty()) tree_allreduce(*link_, mem_->dense_grads(), scratch_, &xstats_);
  if (mem_ && mem_->shards()) mem_->shards()->reduce_gradient(mem_->table().pending_grad(), &xstats_);
  else if (mem_) tree_allreduce(*link_, mem_->table().pending_grad(), recv_, merged_, bytes_, &xstats_);
  tree_allreduce(*link_, node_loss_, &xstats_);
  // Collision statistics observe every micro-batch of the step in order (only their addresses are needed).
  if (observe)
    for (int64_t a = 0; a < accum; ++a)
      store.with_ids([&](auto ids) {
        mem_->observe_collisions_of(ids, store.doc_offsets(),
                                    std::span<const int64_t>(all_starts_.data() + a * B, static_cast<size_t>(B)), T);
      });
}

void Session::update_backbone(int64_t t, StepStats& out) {
  const TrainConfig& tc = cfg_.train;
  out.grad_norm = adamw_->grad_norm();
  if (tc.grad_clip > 0 && out.grad_norm > tc.grad_clip)
    adamw_->scale_grads(static_cast<float>(tc.grad_clip / out.grad_norm));
  adamw_->step(t, out.lr);
}

void Session::update_memory(int64_t t, bool observe, bool report_collisions, StepStats& out) {
  const int R = ranks(), r = rank();
  out.memory = mem_->stats();  // before the update: rows touched this step
  if (mem_->shards()) {  // each rank holds the gradient of its own rows
    double touched = static_cast<double>(out.memory.touched_rows);
    mem_->shards()->sum(touched, &xstats_);
    out.memory.touched_rows = static_cast<int64_t>(touched);
  }
  if (R > 1 && !out.memory.mean_alpha.empty() && (r == 0 || r == R - 1)) {
    // The mean gate of the step's last micro-batch, which rank R-1 computed: to rank 0, which logs it.
    std::vector<double> theirs(out.memory.mean_alpha.size());
    const auto& mine = out.memory.mean_alpha;
    link_->sendrecv(r == 0 ? R - 1 : 0, {reinterpret_cast<const std::byte*>(mine.data()), mine.size() * sizeof(double)},
                    {reinterpret_cast<std::byte*>(theirs.data()), theirs.size() * sizeof(double)});
    if (r == 0) out.memory.mean_alpha = theirs;
  }
  mem_->step_table(t);
  if (observe) out.collisions = mem_->finish_collisions(report_collisions);
}

int64_t Session::tree_bytes() const {
  int64_t b = 0;
  for (const Slot& s : slots_)
    b += static_cast<int64_t>((s.model.capacity() + s.memory.capacity() + s.table.values.capacity()) * sizeof(float) +
                              s.table.rows.capacity() * sizeof(int64_t));
  b +=
      static_cast<int64_t>((merged_.values.capacity() + recv_.values.capacity() + scratch_.capacity()) * sizeof(float) +
                           (merged_.rows.capacity() + recv_.rows.capacity()) * sizeof(int64_t) + bytes_.capacity());
  return b;
}

double Session::evaluate(const data::ValidationWindows& val, int64_t n, const data::TokenStore& heldout,
                         const std::function<void(int64_t, int64_t)>& progress) {
  const MemoryPhaseTimes kept = mem_ ? mem_->phase_times() : MemoryPhaseTimes{};
  const double l = pg::evaluate(*model_, val, n, heldout, mem_.get(), progress);
  if (mem_) mem_->restore_phase_times(kept);  // the phase timers measure training steps only
  return l;
}

void Session::save(const std::string& path, bool keep_previous) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  SavedShards shards;
  if (table_sharded()) {
    // Every rank writes its own rows to a file named by the step and this save's id; only when every rank has does
    // rank 0 write the checkpoint that maps them (a checkpoint never maps a shard that is missing or of another
    // save). The id: 48 random bits drawn by rank 0 (their sum with the other ranks' zeros is exact in a double).
    const int R = ranks();
    double id = 0;
    if (rank() == 0) {
      std::random_device rd;
      id = static_cast<double>(((uint64_t{rd()} << 32) ^ rd()) & ((uint64_t{1} << 48) - 1));
    }
    tree_allreduce(*link_, id);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%012llx", static_cast<unsigned long long>(id));
    shards.save_id = hex;
    shards.bounds = shard_bounds(mem_->table().layout().rows(), R);
    for (int q = 0; q < R; ++q)
      shards.files.push_back(fs::path(table_shard_path(path, st_.step, shards.save_id, q, R)).filename().string());
    std::string error;
    try {
      std::error_code ec;
      if (!dir.empty() && !fs::is_directory(dir) && (fs::create_directories(dir, ec), ec || !fs::is_directory(dir)))
        throw IoError(str("cannot create the folder ", dir.string(), " for table shard ", rank(), " of ", R, ": ",
                          ec ? ec.message() : "not a folder",
                          " (hint: the run directory must be one folder every rank can write, on a filesystem ",
                          "the nodes share)"));
      mem_->table().save_shard(table_shard_path(path, st_.step, shards.save_id, rank(), R), shards.save_id);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    std::vector<float> failed(static_cast<size_t>(R), 0.0f), scratch;
    failed[static_cast<size_t>(rank())] = error.empty() ? 0.0f : 1.0f;
    tree_allreduce(*link_, failed, scratch);
    const auto first = std::find(failed.begin(), failed.end(), 1.0f) - failed.begin();
    if (first < R) {  // the first failing rank's error goes to rank 0, which prints it
      const int q = static_cast<int>(first);
      if (q != 0 && rank() == q) {
        const int64_t n = static_cast<int64_t>(error.size());
        link_->sendrecv(0, bytes_of(&n, 1), {});
        link_->sendrecv(0, {reinterpret_cast<const std::byte*>(error.data()), error.size()}, {});
      } else if (q != 0 && rank() == 0) {
        int64_t n = 0;
        link_->sendrecv(q, {}, bytes_of(&n, 1));
        error.assign(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 20)), ' ');
        link_->sendrecv(q, {}, {reinterpret_cast<std::byte*>(error.data()), error.size()});
      }
      const int64_t n_failed = std::count(failed.begin(), failed.end(), 1.0f);
      const bool knows = rank() == 0 || rank() == q;  // the others have not seen rank q's error
      throw ResourceError(str("checkpoint ", path, " of step ", st_.step, " not written (the previous one is kept): ",
                              n_failed, " of ", R, " ranks could not write their table shard; rank ", q, ": ",
                              knows && !error.empty() ? error : std::string("(its error is in rank 0's line)")));
    }
  }
  // Rank 0 writes the checkpoint. The shard files the checkpoint being replaced maps stay until the next save (a
  // reader of it, e.g. an export of a running training, keeps its files), except after the run's last save.
  const auto commit = [&] {
    if (table_sharded()) mem_->table().check_shards(shards, dir.string());  // all seen (a folder the ranks share)
    std::vector<std::string> keep;
    if (keep_previous && fs::exists(path)) {
      try {
        keep = checkpoint_shard_files(path);
      } catch (const std::exception&) {  // not a readable checkpoint: nothing of it to keep
      }
    }
    SectionWriter save_mem;
    int64_t mem_bytes = 0;
    if (mem_) {
      save_mem = [&](const h5::Group& g) { mem_->save(g, table_sharded() ? &shards : nullptr); };
      const MemoryLayout& L = mem_->table().layout();
      if (!table_sharded()) mem_bytes = L.rows() * (4 * L.width() + 8);  // the table and its optimizer state
    }
    save_checkpoint(path, cfg_, *model_, adamw_.get(), st_, save_mem, mem_bytes);
    for (const std::string& f : shards.files) keep.push_back((dir / f).string());
    remove_stale_table_shards(path, keep);  // earlier saves' shards, and those of a run before a --force or resume
  };
  if (!table_sharded()) {
    commit();
    return;
  }
  // Every rank learns whether rank 0 committed: a failure there fails the save on every rank (none waits for it).
  std::exception_ptr failed0;
  double committed = 0;
  if (rank() == 0) {
    try {
      commit();
      committed = 1;
    } catch (...) {
      failed0 = std::current_exception();
    }
  }
  tree_allreduce(*link_, committed);
  if (failed0) std::rethrow_exception(failed0);
  if (committed != 1)
    throw ResourceError(str("checkpoint ", path, " of step ", st_.step, ": rank 0 could not write it (its error is ",
                            "in rank 0's line); the previous one is kept"));
}

ExchangeStats Session::exchange_stats() const {
  ExchangeStats x = xstats_;
  if (mem_) {
    const ExchangeStats& f = mem_->shard_exchange();
    x.seconds += f.seconds, x.bytes_sent += f.bytes_sent, x.messages += f.messages;
  }
  return x;
}

void Session::reset_exchange_stats() {
  xstats_ = {};
  if (mem_) mem_->shard_exchange() = {};
}

void Session::load(const std::string& path) {
  SectionReader load_mem;
  if (mem_) load_mem = [&](const h5::Group& g) { mem_->load(g); };
  st_ = load_checkpoint(path, *model_, adamw_.get(), load_mem);
}

bool Session::finite() const {
  if (!all_finite(model_->params())) return false;
  return !adamw_ || adamw_->state_finite();
}

}  // namespace pg
