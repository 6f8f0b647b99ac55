// The run log's /collisions group (train/FORMATS.md, "Run log"): a tiny PageGram run on the fixture corpus logs
// per-step statistics of the right shape and range, consistent with memory/touched_rows; training results are
// bit-identical with the statistics off; the statistics are the same for 1 and 2 threads; log_interval
// selects the logged steps; a resumed run keeps the rows before the resume step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/h5.h"
#include "data/pipeline.h"
#include "train/config.h"
#include "sweep/spec.h"
#include "train/trainer.h"
#include "tests/test_util.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class CollisionLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun("coll", {"train.steps=8", "train.eval_interval=0", "train.eval_windows=16",
                                      "train.checkpoint_interval=0", "train.log_interval=1", "memory.layout=pagegram",
                                      "memory.target_params=200000", "memory.inject_layers=[0, 1]"});
  }
  static void TearDownTestSuite() { tiny_.remove(); }
  static ExperimentConfig config(const std::string& run, int64_t threads = 0) { return tiny_.config(run, threads); }
  static TrainSummary run(const ExperimentConfig& c, int64_t stop_after = -1, bool resume = false) {
    return testing::TinyRun::train_run(c, stop_after, resume);
  }
  static inline testing::TinyRun tiny_;
};

// Bitwise equality (NaN == NaN).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST_F(CollisionLogTest, LogsPerStepStatisticsOfEveryOrderAndHead) {
  const ExperimentConfig c = config("pg");
  run(c);
  h5::File f = h5::File::open(c.train.out_dir + "/log.h5");
  const h5::Group g = f.root().sub("collisions");
  EXPECT_EQ(g.read<int64_t>("step"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(g.read<int64_t>("orders"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.attr_int("owners"), 1);
  EXPECT_EQ(g.attr_int("heads_per_order"), 8);
  std::vector<uint64_t> shape;
  const auto touched = g.read<int64_t>("touched_rows", &shape);
  EXPECT_EQ(shape, (std::vector<uint64_t>{8, 2, 8}));
  EXPECT_EQ(g.dataset_shape("lookups"), (std::vector<uint64_t>{8, 2}));
  const auto lookups = g.read<int64_t>("lookups"), distinct = g.read<int64_t>("distinct");
  const auto lpr = g.read<double>("lookups_per_row"), fs_ = g.read<double>("foreign_step"),
             fo = g.read<double>("foreign_owner"), co = g.read<double>("co_heads"), pm = g.read<double>("page_mates");
  const auto pairs = g.read<int64_t>("shared_pairs");
  const int64_t N = c.train.tokens_per_step;
  for (size_t s = 0; s < 8; ++s) {
    int64_t rows_all_heads = 0;
    for (size_t o = 0; o < 2; ++o) {
      EXPECT_EQ(lookups[s * 2 + o], N);
      EXPECT_GT(distinct[s * 2 + o], 0);
      EXPECT_LE(distinct[s * 2 + o], N);
      EXPECT_TRUE(pm[s * 2 + o] >= 0.0 && std::isfinite(pm[s * 2 + o]));
      for (size_t k = 0; k < 8; ++k) {
        const size_t i = (s * 2 + o) * 8 + k;
        rows_all_heads += touched[i];
        EXPECT_GT(touched[i], 0);
        EXPECT_LE(touched[i], distinct[s * 2 + o]);
        EXPECT_DOUBLE_EQ(lpr[i], static_cast<double>(N) / static_cast<double>(touched[i]));
        EXPECT_TRUE(fs_[i] >= 0.0 && fs_[i] <= 1.0);
        EXPECT_TRUE(fo[i] >= 0.0 && fo[i] <= 1.0);
        EXPECT_GT(pairs[i], 0);  // a small table: some distinct n-grams share a row
        EXPECT_TRUE(co[i] >= 0.0 && co[i] <= 7.0);
      }
    }
    // Head rows are disjoint: the rows of all heads add up to the trainer's own count of touched rows.
    const h5::Group tr = f.root().sub("scalars").sub("memory:touched_rows");
    EXPECT_EQ(static_cast<double>(rows_all_heads), tr.read<double>("value")[s]) << "step " << s + 1;
  }
  EXPECT_GT(f.root().sub("summary").attr_double("collision_owner_bytes"), 0.0);
  EXPECT_GE(f.root().sub("summary").attr_double("collision_stats_fraction"), 0.0);
}

TEST_F(CollisionLogTest, ResultsUnchangedAndThreadIndependent) {
  ExperimentConfig off = config("off", 2);
  off.memory.collision_stats = false;
  const TrainSummary a = run(config("on1", 1)), b = run(config("on2", 2)), c = run(off);
  h5::File fa = h5::File::open(a.out_dir + "/log.h5"), fb = h5::File::open(b.out_dir + "/log.h5"),
           fc = h5::File::open(c.out_dir + "/log.h5");
  EXPECT_EQ(fa.root().sub("train").read<double>("loss"), fc.root().sub("train").read<double>("loss"));
  EXPECT_EQ(a.final_eval, c.final_eval);
  EXPECT_EQ(a.final_train_loss, c.final_train_loss);
  EXPECT_FALSE(fc.root().has("collisions"));
  for (const char* name : {"foreign_step", "foreign_owner", "co_heads", "lookups_per_row", "page_mates"})
    EXPECT_TRUE(
        same_bits(fa.root().sub("collisions").read<double>(name), fb.root().sub("collisions").read<double>(name)))
        << name;
  EXPECT_EQ(fa.root().sub("collisions").read<int64_t>("shared_pairs"),
            fb.root().sub("collisions").read<int64_t>("shared_pairs"));
  // The statistics' keys never change results: the sweep's config hash ignores them.
  EXPECT_EQ(config_hash(config("x")), config_hash(off));
}

TEST_F(CollisionLogTest, LogIntervalAndResume) {
  ExperimentConfig c = config("interval");
  c.train.log_interval = 3;
  c.memory.collision_owners = false;
  run(c);
  h5::File f = h5::File::open(c.train.out_dir + "/log.h5");
  EXPECT_EQ(f.root().sub("collisions").read<int64_t>("step"), (std::vector<int64_t>{3, 6, 8}));
  EXPECT_EQ(f.root().sub("collisions").attr_int("owners"), 0);
  const auto fo = f.root().sub("collisions").read<double>("foreign_owner");
  for (double x : fo) EXPECT_TRUE(std::isnan(x));

  // Resume: rows up to the checkpoint are kept, later ones come from the resumed steps; the per-step reading
  // (a) is the same as in one uninterrupted run.
  const ExperimentConfig full = config("full"), split = config("split");
  run(full);
  run(split, 4);
  run(split, -1, true);
  h5::File ff = h5::File::open(full.train.out_dir + "/log.h5"), fs2 = h5::File::open(split.train.out_dir + "/log.h5");
  EXPECT_EQ(fs2.root().sub("collisions").read<int64_t>("step"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(same_bits(ff.root().sub("collisions").read<double>("foreign_step"),
                        fs2.root().sub("collisions").read<double>("foreign_step")));
}

}  // namespace
}  // namespace pg
