// Implementation of eval/collision_class.h.
#include "eval/collision_class.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/text.h"
#include "memory/ngram.h"
#include "memory/row_occupancy.h"
#include "memory/step_collisions.h"
#include "train/memory_injector.h"

namespace pg {

double CollisionClassRow::share(int c) const {
  const int64_t n = positions[0] + positions[1] + positions[2];
  return n ? static_cast<double>(positions[c]) / static_cast<double>(n) : 0.0;
}

double CollisionClassRow::owner_share(int c) const {
  const int64_t n = owner_positions[0] + owner_positions[1] + owner_positions[2];
  return n ? static_cast<double>(owner_positions[c]) / static_cast<double>(n) : 0.0;
}

CollisionClassReport loss_by_collision_class(TrainedModel& tm, int64_t n,
                                             const std::function<void(int64_t, int64_t)>& progress) {
  MemoryInjector* mem = tm.mem();
  if (!mem)
    throw UserError("collision classes: the checkpoint was trained without a memory table (memory.layout none)");
  PG_CHECK(tm.data, "loss_by_collision_class needs the checkpoint's dataset");
  const ExperimentConfig& cfg = tm.cfg();
  const data::DataSet& ds = *tm.data;
  const MemoryLayout& L = mem->table().layout();
  const int64_t T = cfg.model.context, no = L.n_orders(), K = L.heads_per_order();
  CollisionClassReport rep;
  rep.layout = L.label();
  rep.rows = L.rows();

  // 1. The run's training windows, in the trainer's order, up to the checkpoint's sampler counter.
  RowOccupancy occ(L);
  {
    data::WindowSampler sampler = ds.sampler(T, static_cast<uint64_t>(cfg.train.seed));
    const uint64_t end = tm.state().sampler_counter;
    const int64_t B = cfg.train.micro_batch;
    std::vector<int64_t> starts;
    Addresses addr;
    std::vector<uint64_t> keys;
    while (sampler.counter() < end) {
      starts.clear();
      while (static_cast<int64_t>(starts.size()) < B && sampler.counter() < end)
        starts.push_back(static_cast<int64_t>(sampler.next_start()));
      ds.train->with_ids([&](auto ids) {
        compute_window_addresses(L, ids, ds.train->doc_offsets(), starts, T, addr);
        compute_window_ngram_keys(L, ids, ds.train->doc_offsets(), starts, T, keys);
      });
      occ.add(addr.rows.data(), keys.data(), addr.n);
      rep.train_windows += static_cast<int64_t>(starts.size());
    }
    const int64_t expect = tm.state().step * cfg.train.accum_steps(T) * B;
    if (rep.train_windows != expect)
      throw IoError(str("collision classes: replaying the sampler gave ", rep.train_windows, " training windows, the ",
                        "checkpoint's ", tm.state().step, " steps drew ", expect,
                        " (hint: a checkpoint of another "
                        "build or data; retrain)"));
  }
  rep.touched_rows = occ.touched_rows();
  rep.shared_rows = occ.shared_rows();

  // 2. Validation windows: per-position loss and class.
  rep.orders.resize(static_cast<size_t>(no));
  for (int64_t o = 0; o < no; ++o) rep.orders[o].order = L.orders()[o], rep.orders[o].heads_per_order = K;
  Transformer& model = tm.model();
  const data::ValidationWindows val = ds.validation(T);
  const int64_t total = (n <= 0 || n > val.count()) ? val.count() : n;
  const int64_t B = model.micro_batch(), H = L.heads();
  std::vector<int32_t> buf(static_cast<size_t>(B * (T + 1)));
  std::vector<int64_t> starts;
  Addresses addr;
  std::vector<uint64_t> keys;
  double sum = 0;
  for (int64_t k = 0; k < total; k += B) {
    const int64_t b = std::min(B, total - k);
    val.windows(k, b, buf.data());
    starts.clear();
    for (int64_t i = 0; i < b; ++i) starts.push_back(static_cast<int64_t>(val.start(k + i)));
    ds.heldout->with_ids([&](auto ids) {
      mem->prepare(ids, ds.heldout->doc_offsets(), starts, T);
      compute_window_addresses(L, ids, ds.heldout->doc_offsets(), starts, T, addr);
      compute_window_ngram_keys(L, ids, ds.heldout->doc_offsets(), starts, T, keys);
    });
    model.forward_loss(buf.data(), b);
    const std::span<const double> loss = model.token_losses();
    PG_CHECK(static_cast<int64_t>(loss.size()) == b * T && addr.n == b * T, "positions of the batch");
    for (int64_t p = 0; p < b * T; ++p) {
      sum += loss[p];
      for (int64_t o = 0; o < no; ++o) {
        const int64_t f = occ.foreign_heads(addr.rows.data() + p * H, keys[p * no + o], o);
        const int c = f == 0 ? 0 : f < K ? 1 : 2;
        rep.orders[o].positions[c]++;
        rep.orders[o].loss_sum[c] += loss[p];
        const int64_t f2 = occ.non_owner_heads(addr.rows.data() + p * H, keys[p * no + o], o);
        const int c2 = f2 == 0 ? 0 : f2 < K ? 1 : 2;
        rep.orders[o].owner_positions[c2]++;
        rep.orders[o].owner_loss_sum[c2] += loss[p];
      }
    }
    if (progress) progress(k + b, total);
  }
  rep.windows = total;
  rep.positions = total * T;
  rep.mean_loss = rep.positions ? sum / static_cast<double>(rep.positions) : 0.0;
  return rep;
}

std::string format_collision_class_table(const CollisionClassReport& r) {
  std::string o = str("held-out loss by collision class, ", r.layout, ": ", r.windows, " validation windows (",
                      format_count(static_cast<double>(r.positions)), " positions), mean ");
  char b[256];
  std::snprintf(b, sizeof b, "%.4f nats; training replayed %lld windows: %lld of %lld rows touched, %lld shared\n",
                r.mean_loss, static_cast<long long>(r.train_windows), static_cast<long long>(r.touched_rows),
                static_cast<long long>(r.rows), static_cast<long long>(r.shared_rows));
  o += b;
  o += "order  heads |  clean: share   loss |  some: share   loss |   all: share   loss\n";
  for (const CollisionClassRow& x : r.orders) {
    std::snprintf(b, sizeof b, "%5lld  %5lld |  %12.3f %6.4f |  %11.3f %6.4f |  %11.3f %6.4f\n",
                  static_cast<long long>(x.order), static_cast<long long>(x.heads_per_order), x.share(0), x.mean(0),
                  x.share(1), x.mean(1), x.share(2), x.mean(2));
    o += b;
  }
  o += "owner reading |  owned: share   loss |  some: share   loss |  none: share   loss\n";
  for (const CollisionClassRow& x : r.orders) {
    std::snprintf(b, sizeof b, "order %lld      |  %12.3f %6.4f |  %11.3f %6.4f |  %11.3f %6.4f\n",
                  static_cast<long long>(x.order), x.owner_share(0), x.owner_mean(0), x.owner_share(1), x.owner_mean(1),
                  x.owner_share(2), x.owner_mean(2));
    o += b;
  }
  o += "clean: no head of the order reads a row that training gave another n-gram; some: 1..K-1 heads do; all: every "
       "head does. owned: the n-gram is the most frequent training n-gram of its row in every head; none: of none "
       "(eval/collision_class.h)\n";
  return o;
}

}  // namespace pg
