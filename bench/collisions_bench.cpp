// Cost of the run log's per-step collision statistics (memory/step_collisions.h) at the regime preset's
// shape: 16,384 positions per step (128 windows x 128), orders 2 and 3, K 8, r 64, 25M-parameter table,
// tokens drawn from a Zipf(1.1) vocabulary of 8,192 (real text repeats n-grams). Single-threaded (the
// statistics are serial). Prints the median ms per step of: n-gram keys, the copy of addresses (add), and
// finish() with and without owner tracking.
//   bench_collisions_bench [--layout pagegram|engram|flat] [--target P] [--windows B] [--context T] [--steps S]
//   bench_collisions_bench --config configs/regime.yaml [--steps S] [--set key=value ...]   # the real train store and
//   the trainer's
//       window sampler (memory section and batch from the config): the owner memory of a whole run
// The statistics' cost inside training is printed by `pagegram bench train` (and stored in the run log's summary).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/timer.h"
#include "data/pipeline.h"
#include "train/config.h"
#include "memory/ngram.h"
#include "memory/step_collisions.h"

int main(int argc, char** argv) {
  std::string layout = "pagegram", config;
  std::vector<std::string> sets;
  int64_t target = 25000000, B = 128, T = 128, steps = 20, vocab = 8192;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--layout") layout = argv[i + 1];
    else if (a == "--target") target = std::atoll(argv[i + 1]);
    else if (a == "--windows") B = std::atoll(argv[i + 1]);
    else if (a == "--context") T = std::atoll(argv[i + 1]);
    else if (a == "--steps") steps = std::atoll(argv[i + 1]);
    else if (a == "--config") config = argv[i + 1];
    else if (a == "--set") sets.push_back(argv[i + 1]);
  }
  if (!config.empty()) {
    sets.insert(sets.begin(), "memory.layout=" + layout);
    const pg::ExperimentConfig cfg = pg::load_experiment(config, sets);
    const pg::data::DataSet ds = pg::data::open_dataset(cfg.data, cfg.tokenizer, config);
    const int64_t Tc = cfg.model.context, Bc = cfg.train.micro_batch, accum = cfg.train.accum_steps(Tc);
    auto l = pg::make_layout(cfg.memory, cfg.model.d_model);
    pg::data::WindowSampler sampler = ds.sampler(Tc, static_cast<uint64_t>(cfg.train.seed));
    pg::StepCollisionCounter counter(*l, true);
    pg::Addresses addr;
    std::vector<uint64_t> keys;
    std::vector<int64_t> starts(static_cast<size_t>(Bc));
    double t_stats = 0;
    pg::StepCollisionStats st;
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t a = 0; a < accum; ++a) {
        for (auto& x : starts) x = static_cast<int64_t>(sampler.next_start());
        ds.train->with_ids([&](auto ids) {
          pg::compute_window_addresses(*l, ids, ds.train->doc_offsets(), starts, Tc, addr);
          const pg::Timer t;
          pg::compute_window_ngram_keys(*l, ids, ds.train->doc_offsets(), starts, Tc, keys);
          counter.add(addr.rows.data(), keys.data(), addr.n);
          t_stats += t.seconds();
        });
      }
      const pg::Timer t;
      st = counter.finish();
      t_stats += t.seconds();
      if ((s + 1) % 50 == 0 || s + 1 == steps)
        std::printf(
            "step %ld: owner memory %.1f MiB; %.2f ms per step; o2/h0 foreign_step %.3f foreign_owner %.3f, "
            "o3/h0 %.3f %.3f\n",
            long(s + 1), static_cast<double>(counter.owner_bytes()) / 1048576.0,
            1e3 * t_stats / static_cast<double>(s + 1), st.foreign_step[0], st.foreign_owner[0],
            st.foreign_step[static_cast<size_t>(l->heads_per_order())],
            st.foreign_owner[static_cast<size_t>(l->heads_per_order())]);
    }
    return 0;
  }
  pg::MemoryConfig c;
  c.layout = layout;
  c.target_params = target;
  auto l = pg::make_layout(c, 128);
  // A Zipf token stream of one document, long enough for every step's windows.
  std::mt19937_64 rng(1);
  std::vector<double> w(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) w[static_cast<size_t>(i)] = 1.0 / std::pow(static_cast<double>(i + 1), 1.1);
  std::discrete_distribution<uint32_t> zipf(w.begin(), w.end());
  const int64_t n_tok = std::max<int64_t>(4'000'000, B * (T + 1) * 2);
  std::vector<uint32_t> tokens(static_cast<size_t>(n_tok));
  for (auto& t : tokens) t = zipf(rng);
  const std::vector<uint64_t> docs{0};
  std::uniform_int_distribution<int64_t> start(0, n_tok - T - 1);

  for (bool owners : {false, true}) {
    pg::StepCollisionCounter counter(*l, owners);
    pg::Addresses addr;
    std::vector<uint64_t> keys;
    std::vector<double> t_keys, t_add, t_finish;
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> starts(static_cast<size_t>(B));
      for (auto& x : starts) x = start(rng);
      pg::compute_window_addresses(*l, std::span<const uint32_t>(tokens), docs, starts, T, addr);
      pg::Timer t;
      pg::compute_window_ngram_keys(*l, std::span<const uint32_t>(tokens), docs, starts, T, keys);
      t_keys.push_back(t.seconds() * 1e3);
      t.reset();
      counter.add(addr.rows.data(), keys.data(), addr.n);
      t_add.push_back(t.seconds() * 1e3);
      t.reset();
      const pg::StepCollisionStats st = counter.finish();
      t_finish.push_back(t.seconds() * 1e3);
      if (s + 1 == steps)
        std::printf("%s owners %-3s: last step foreign_step o2/h0 %.3f, foreign_owner %.3f, distinct %ld / %ld\n",
                    layout.c_str(), owners ? "on" : "off", st.foreign_step[0], st.foreign_owner[0],
                    long(st.distinct[0]), long(st.lookups[0]));
    }
    auto med = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "%s owners %-3s: %ld positions/step, %ld rows: keys %.2f ms  add %.2f ms  finish %.2f ms  (median of %ld "
        "steps); owner memory %.1f MiB\n",
        layout.c_str(), owners ? "on" : "off", long(B * T), long(l->rows()), med(t_keys), med(t_add), med(t_finish),
        long(steps), static_cast<double>(counter.owner_bytes()) / 1048576.0);
  }
}
