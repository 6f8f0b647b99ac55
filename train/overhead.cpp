// Implementation of train/overhead.h.
#include "train/overhead.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>

#include "core/threads.h"
#include "core/timer.h"
#include "data/synthetic.h"
#include "train/session.h"
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
  // Random tokens in documents of 8,192 (as bench train --synthetic); each config samples its own windows.
  const data::SyntheticDataSet syn(base.model.vocab, base.model.context, static_cast<uint64_t>(base.train.seed));
  const data::DataSet& ds = syn.dataset();

  struct Variant {
    std::unique_ptr<Session> session;
    std::unique_ptr<data::WindowSampler> sampler;
  };
  std::vector<Variant> vs(cfgs.size());
  constexpr double kLr = 1e-5;  // small and constant: the weights stay sane over many steps; the work is the same
  for (size_t i = 0; i < cfgs.size(); ++i) {
    ExperimentConfig c = cfgs[i];
    c.train.lr = kLr;
    c.train.warmup_frac = c.train.decay_frac = 0.0;
    c.train.steps = std::max<int64_t>(c.train.total_steps(), warmup + rounds);
    vs[i].session = std::make_unique<Session>(c, SessionOptions{.optimizer = true, .tokenizer = ds.tokenizer.get()});
    vs[i].sampler =
        std::make_unique<data::WindowSampler>(ds.sampler(c.model.context, static_cast<uint64_t>(c.train.seed)));
  }

  OverheadResult res;
  res.tokens_per_step = base.train.tokens_per_step;
  res.threads = threads.threads;
  for (size_t i = 0; i < cfgs.size(); ++i) res.variants.push_back({cfgs[i].name, cfgs[i].memory.layout, {}, {}});
  for (int64_t r = 0; r < warmup + rounds; ++r) {
    for (size_t k = 0; k < vs.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % vs.size();  // rotate: no variant always runs after the same one
      Variant& v = vs[i];
      MemoryInjector* mem = v.session->memory();
      if (mem && r == warmup) mem->reset_phase_times();
      const Timer timer;
      v.session->step(*ds.train, *v.sampler);
      if (r >= warmup) res.variants[i].step_seconds.push_back(timer.seconds());
    }
    if (on_round) on_round(r);
  }
  for (size_t i = 0; i < vs.size(); ++i)
    if (const MemoryInjector* mem = vs[i].session->memory()) res.variants[i].phases = mem->phase_times();
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
