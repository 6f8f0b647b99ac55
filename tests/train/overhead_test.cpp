// measure_overhead (train/overhead.h): the in-process, round-robin overhead benchmark on the tiny shape.
#include "train/overhead.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/test_util.h"

namespace pg {
namespace {

ExperimentConfig tiny(const std::vector<std::string>& extra) {
  std::vector<std::string> sets = {"train.tokens_per_step=512", "train.micro_batch=8"};  // 2 micro-batches per step
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_experiment(pg::testing::kTinyConfig, sets);
}

TEST(Overhead, TimesEveryConfigEveryRoundAndTheMemoryPhases) {
  const std::vector<ExperimentConfig> cfgs = {
      tiny({}), tiny({"memory.layout=pagegram", "memory.target_params=20000", "memory.inject_layers=[0, 1]"}),
      tiny({"memory.layout=flat", "memory.target_params=20000", "memory.inject_layers=[1]"})};
  int64_t rounds_seen = 0;
  const OverheadResult r = measure_overhead(cfgs, 3, 1, [&](int64_t) { ++rounds_seen; });
  EXPECT_EQ(rounds_seen, 4);
  EXPECT_EQ(r.tokens_per_step, 512);
  ASSERT_EQ(r.variants.size(), 3u);
  EXPECT_EQ(r.variants[0].layout, "none");
  EXPECT_EQ(r.variants[1].layout, "pagegram");
  for (const OverheadVariant& v : r.variants) {
    ASSERT_EQ(v.step_seconds.size(), 3u) << v.layout;
    for (double s : v.step_seconds) EXPECT_GT(s, 0.0) << v.layout;
  }
  EXPECT_EQ(r.variants[0].phases.total(), 0.0);  // no memory, no memory work
  for (int i : {1, 2}) {
    const MemoryPhaseTimes& m = r.variants[static_cast<size_t>(i)].phases;
    EXPECT_GT(m.gather, 0.0) << r.variants[static_cast<size_t>(i)].layout;
    EXPECT_GT(m.table_grad, 0.0);
    EXPECT_GT(m.table_update, 0.0);
    double steps = 0;
    for (double s : r.variants[static_cast<size_t>(i)].step_seconds) steps += s;
    EXPECT_LT(m.total(), steps) << "the memory's phases are part of its steps";
  }
  EXPECT_GT(r.variants[1].phases.project, 0.0);  // multi-head: W_V projection
  EXPECT_GT(r.peak_rss_kb, 0);
}

TEST(Overhead, ConfigsOfDifferentShapesAreRejected) {
  try {
    measure_overhead({tiny({}), tiny({"model.d_model=64"})}, 1, 0);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("another model section"), std::string::npos) << e.what();
  }
  try {
    measure_overhead({tiny({}), tiny({"train.micro_batch=4", "train.tokens_per_step=512"})}, 1, 0);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("micro_batch"), std::string::npos) << e.what();
  }
}

TEST(Overhead, RowsArePerRoundRatiosAgainstTheBaseline) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  OverheadResult r;
  r.tokens_per_step = 1000;
  r.variants.push_back({"none", "none", {1.0, 2.0, 1.0}, {}});
  r.variants.push_back({"flat", "flat", {1.25, 2.5, 2.0}, {}});
  r.variants[1].phases.gather = 0.575;  // 10% of its 5.75 s
  const std::vector<OverheadRow> rows = overhead_rows(r);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].overhead_median, 0.0);
  EXPECT_DOUBLE_EQ(rows[0].tok_s_max, 1000.0);
  // rounds: 1 - 1/1.25 = 20%, 1 - 2/2.5 = 20%, 1 - 1/2 = 50%: the slow second round cancels
  EXPECT_DOUBLE_EQ(rows[1].overhead_median, 20.0);
  EXPECT_DOUBLE_EQ(rows[1].overhead_max, 50.0);
  EXPECT_DOUBLE_EQ(rows[1].tok_s_min, 400.0);
  EXPECT_DOUBLE_EQ(rows[1].tok_s_median, 500.0);
  EXPECT_DOUBLE_EQ(rows[1].seconds, 5.75);
  EXPECT_NEAR(rows[1].memory_share, 10.0, 1e-12);
}

}  // namespace
}  // namespace pg
