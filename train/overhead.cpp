// Implementation of train/overhead.h.
#include "train/overhead.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <random>

#include "core/threads.h"
#include "core/timer.h"
#include "data/synthetic.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/trainer.h"

namespace pg {

OverheadResult measure_overhead(const std::vector<ExperimentConfig>& cfgs, int64_t rounds, int64_t warmup,
                                const std::function<void(int64_t)>& on_round) {
  PG_CHECK(!cfgs.empty() && rounds >= 1 && warmup >= 0);
  const ExperimentConfig& base = cfgs[0];
  for (const ExperimentConfig& c : cfgs) {
    if (!cfg::equal(c.model, base.model))
      throw ConfigError(str("bench overhead: config ", c.name, " has another model section than ", base.name,
                            " (hint: compare variants of one shape)"));
    if (c.train.micro_batch != base.train.micro_batch || c.train.tokens_per_step != base.train.tokens_per_step)
      throw ConfigError(str("bench overhead: config ", c.name, " has train.micro_batch / tokens_per_step ",
                            c.train.micro_batch, " / ", c.train.tokens_per_step, ", ", base.name, " ",
                            base.train.micro_batch, " / ", base.train.tokens_per_step,
                            " (hint: give every config the same --set overrides)"));
  }
  const ThreadInfo threads = setup_threads(static_cast<int>(base.train.threads));
  const int64_t T = base.model.context, B = base.train.micro_batch, accum = base.train.accum_steps(T);
  Transformer model(base.model, B);
  model.init(static_cast<uint64_t>(base.train.seed));

  // Random tokens in documents of 8,192 (as bench train --synthetic), windows at random starts.
  const int64_t store = std::max<int64_t>(1 << 20, 8 * B * (T + 1));
  std::vector<uint32_t> ids(static_cast<size_t>(store));
  RngStream rng(static_cast<uint64_t>(base.train.seed), "bench.synthetic");
  data::random_tokens(rng, base.model.vocab, ids);
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  std::mt19937_64 gen(12345);  // window starts
  std::vector<uint64_t> doc_offsets;
  for (int64_t d = 0; d < store; d += 8192) doc_offsets.push_back(static_cast<uint64_t>(d));
  std::uniform_int_distribution<int64_t> start(0, store - T - 1);
  std::vector<int32_t> windows(static_cast<size_t>(B * (T + 1)));
  std::vector<int64_t> starts(static_cast<size_t>(B));

  struct Variant {
    std::unique_ptr<MemoryInjector> mem;
    std::unique_ptr<AdamW> adamw;
    int64_t t = 0;
  };
  std::vector<Variant> vs(cfgs.size());
  constexpr double kLr = 1e-5;  // small: the weights stay sane over many shared steps; the work is the same
  for (size_t i = 0; i < cfgs.size(); ++i) {
    vs[i].mem = attach_memory(cfgs[i], model);
    std::vector<ParamView> views = backbone_views(model);
    if (vs[i].mem) {
      for (const ParamView& v : vs[i].mem->dense_params()) views.push_back(v);
      vs[i].mem->set_lr_schedule([](int64_t) { return kLr; });
    }
    const TrainConfig& tc = cfgs[i].train;
    vs[i].adamw = std::make_unique<AdamW>(views, AdamWSettings{tc.beta1, tc.beta2, tc.eps, tc.weight_decay});
  }

  OverheadResult res;
  res.tokens_per_step = base.train.tokens_per_step;
  res.threads = threads.threads;
  for (size_t i = 0; i < cfgs.size(); ++i)
    res.variants.push_back({cfgs[i].name, cfgs[i].memory.layout, {}, {}});
  for (int64_t r = 0; r < warmup + rounds; ++r) {
    for (size_t k = 0; k < vs.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % vs.size();  // rotate: no variant always runs after the same one
      Variant& v = vs[i];
      MemoryInjector* mem = v.mem.get();
      model.set_injector(mem);
      if (mem && r == warmup) mem->reset_phase_times();
      const Timer timer;
      model.zero_grads();
      if (mem) mem->zero_dense_grads();
      for (int64_t a = 0; a < accum; ++a) {
        for (int64_t b = 0; b < B; ++b) {
          starts[static_cast<size_t>(b)] = start(gen);
          std::copy_n(tokens.begin() + starts[static_cast<size_t>(b)], T + 1, windows.begin() + b * (T + 1));
        }
        if (mem) mem->prepare(std::span<const int32_t>(tokens), doc_offsets, starts, T);
        model.forward_backward(windows.data(), B, 1.0f / static_cast<float>(accum));
      }
      (void)v.adamw->grad_norm();
      v.adamw->step(++v.t, kLr);
      if (mem) mem->step_table(v.t);
      if (r >= warmup) res.variants[i].step_seconds.push_back(timer.seconds());
    }
    if (on_round) on_round(r);
  }
  model.set_injector(nullptr);
  for (size_t i = 0; i < vs.size(); ++i)
    if (vs[i].mem) res.variants[i].phases = vs[i].mem->phase_times();
  res.peak_rss_kb = peak_rss_kb();
  return res;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<OverheadRow> overhead_rows(const OverheadResult& r) {
  std::vector<OverheadRow> rows;
  if (r.variants.empty()) return rows;
  const auto& base = r.variants[0].step_seconds;
  for (const OverheadVariant& v : r.variants) {
    std::vector<double> over, toks;
    for (size_t i = 0; i < v.step_seconds.size(); ++i) {
      over.push_back(100.0 * (1.0 - base[i] / v.step_seconds[i]));  // 1 - tok/s ratio
      toks.push_back(static_cast<double>(r.tokens_per_step) / v.step_seconds[i]);
    }
    OverheadRow row;
    row.seconds = std::accumulate(v.step_seconds.begin(), v.step_seconds.end(), 0.0);
    if (!toks.empty()) {
      row.tok_s_median = median(toks);
      row.tok_s_min = *std::min_element(toks.begin(), toks.end());
      row.tok_s_max = *std::max_element(toks.begin(), toks.end());
      row.overhead_median = median(over);
      row.overhead_min = *std::min_element(over.begin(), over.end());
      row.overhead_max = *std::max_element(over.begin(), over.end());
    }
    row.memory_share = 100.0 * v.phases.total() / row.seconds;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace pg
