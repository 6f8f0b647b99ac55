// Trainer end to end on the fixture corpus: presets load, bad configs are rejected with the key path,
// 1 vs 2 threads and resume are bit-identical, corrupt/mismatched checkpoints are refused, NaN stops a run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/h5.h"
#include "core/text.h"
#include "data/hash.h"
#include "data/pipeline.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/run_log.h"
#include "train/trainer.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun("train", {"train.steps=8", "train.eval_interval=4", "train.eval_windows=16",
                                       "train.checkpoint_interval=0", "train.log_interval=1"});
    dir_ = tiny_.dir();
    cfg_ = tiny_.base();
  }
  static void TearDownTestSuite() { tiny_.remove(); }
  static ExperimentConfig config(const std::string& run, int64_t threads = 0) { return tiny_.config(run, threads); }
  static TrainSummary run(const ExperimentConfig& c, int64_t stop_after = -1, bool resume = false) {
    return testing::TinyRun::train_run(c, stop_after, resume);
  }
  static std::vector<float> params_of(const std::string& out_dir) {
    h5::File f = h5::File::open(out_dir + "/checkpoint.h5");
    std::vector<float> all;
    h5::Group p = f.root().sub("params");
    for (const auto& name : p.children()) {
      auto v = p.read<float>(name);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
  static std::vector<double> losses_of(const std::string& out_dir) {
    h5::File f = h5::File::open(out_dir + "/log.h5");
    return f.root().sub("train").read<double>("loss");
  }

  static inline testing::TinyRun tiny_;
  static inline fs::path dir_;
  static inline ExperimentConfig cfg_;
};

TEST(Presets, EveryPresetLoadsDumpsAndReloadsEqual) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(PG_SOURCE_DIR "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    ExperimentConfig c = load_experiment(e.path().string());
    ExperimentConfig back = parse_experiment(cfg::dump(c), "dump");
    EXPECT_TRUE(cfg::equal(c, back));
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(Presets, BadConfigsNameTheKey) {
  auto msg = [](std::vector<std::string> sets) -> std::string {
    try {
      load_experiment(PG_SOURCE_DIR "/configs/tiny.yaml", sets);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg({"model.vocab=999"}).find("model.vocab"), std::string::npos);
  EXPECT_NE(msg({"train.tokens_per_step=1000"}).find("train.tokens_per_step"), std::string::npos);
  EXPECT_NE(msg({"model.heads=3"}).find("model.heads"), std::string::npos);
  EXPECT_NE(msg({"train.lr=-1"}).find("train.lr"), std::string::npos);
  EXPECT_NE(msg({"train.bogus=1"}).find("unknown key 'train.bogus'"), std::string::npos);
  EXPECT_NE(msg({"memory.layout=pagegam"}).find("did you mean 'pagegram'"), std::string::npos);
}

TEST(Schedule, WarmupStableDecay) {
  // 100 steps: warm-up 5, decay 20.
  EXPECT_DOUBLE_EQ(wsd_lr(0, 100, 1.0, 0.05, 0.2), 0.2);
  EXPECT_DOUBLE_EQ(wsd_lr(4, 100, 1.0, 0.05, 0.2), 1.0);
  EXPECT_DOUBLE_EQ(wsd_lr(50, 100, 1.0, 0.05, 0.2), 1.0);
  EXPECT_DOUBLE_EQ(wsd_lr(79, 100, 1.0, 0.05, 0.2), 1.0);
  EXPECT_DOUBLE_EQ(wsd_lr(80, 100, 1.0, 0.05, 0.2), 1.0);
  EXPECT_DOUBLE_EQ(wsd_lr(90, 100, 1.0, 0.05, 0.2), 0.5);
  EXPECT_DOUBLE_EQ(wsd_lr(99, 100, 1.0, 0.05, 0.2), 0.05);
}

TEST(AdamWTest, MatchesScalarReference) {
  std::vector<float> p{1.0f, -2.0f}, g{0.5f, 0.25f};
  AdamW opt({{"w", p.data(), g.data(), 1, true}, {"n", p.data() + 1, g.data() + 1, 1, false}},
            AdamWSettings{0.9, 0.95, 1e-8, 0.1});
  double rp[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    opt.step(t, 0.01);
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.95 * v[i] + 0.05 * g[i] * g[i];
      double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.95, t));
      rp[i] = rp[i] * (i == 0 ? 1 - 0.01 * 0.1 : 1.0) - 0.01 * mh / (std::sqrt(vh) + 1e-8);
      EXPECT_NEAR(p[i], rp[i], 1e-6);
    }
  }
  EXPECT_NEAR(opt.grad_norm(), std::sqrt(0.25 + 0.0625), 1e-7);
}

TEST_F(TrainerTest, LearnsAndIsBitIdenticalForOneAndTwoThreads) {
  TrainSummary a = run(config("t1", 1));
  TrainSummary b = run(config("t2", 2));
  EXPECT_LT(a.final_eval, a.first_eval - 0.1);  // it learns
  EXPECT_EQ(losses_of(a.out_dir), losses_of(b.out_dir));
  EXPECT_EQ(params_of(a.out_dir), params_of(b.out_dir));
  EXPECT_EQ(a.final_eval, b.final_eval);
  // The log names the data it trained on (the stores' sizes, tokenizer and corpus manifest hashes).
  const data::DataSet ds = data::open_dataset(cfg_.data, cfg_.tokenizer);
  const std::string fp = h5::File::open(a.out_dir + "/log.h5").root().attr_string("data");
  EXPECT_EQ(fp, data::dataset_fingerprint(ds));
  EXPECT_NE(fp.find(str("train ", ds.train->header().n_tokens, " tokens ")), std::string::npos) << fp;
  EXPECT_NE(fp.find(str("; manifest ", data::hex64(ds.train->header().info.manifest_hash))), std::string::npos) << fp;
}

TEST_F(TrainerTest, ResumeOnOtherDataIsRefused) {
  const std::string path = (dir_ / "other_data" / "log.h5").string();
  RunMeta m{cfg::dump(cfg_), "test", 1, false, "0"};
  m.data = "train 100 tokens 2 docs";
  {
    RunLog log(path, m);
    log.train_row(1, 16, 1.0, 0.1, 1.0, 100.0, 0.1);
    log.flush();
  }
  m.data = "train 101 tokens 2 docs";
  EXPECT_THROW(RunLog(path, m, 1), IoError);
  m.data = "train 100 tokens 2 docs";
  EXPECT_NO_THROW(RunLog(path, m, 1));
}

TEST_F(TrainerTest, MemoryRunLogsTheShareOfItsOwnWork) {
  ExperimentConfig c = config("mem_share");
  c.memory = load_experiment(PG_SOURCE_DIR "/configs/tiny.yaml",
                             {"memory.layout=pagegram", "memory.target_params=20000", "memory.inject_layers=[0, 1]"})
                 .memory;
  run(c);
  h5::File f = h5::File::open(c.train.out_dir + "/log.h5");
  const h5::Group sum = f.root().sub("summary");
  const double all = sum.attr_double("memory_work_fraction"), proj = sum.attr_double("memory_projection_fraction"),
               table = sum.attr_double("memory_table_fraction");
  EXPECT_GT(proj, 0.0);
  EXPECT_GT(table, 0.0);
  EXPECT_LE(proj + table, all);
  EXPECT_LT(all, 1.0);
  h5::File g = h5::File::open(run(config("no_mem_share")).out_dir + "/log.h5");
  EXPECT_FALSE(g.root().sub("summary").has_attr("memory_work_fraction"));
}

TEST_F(TrainerTest, ResumeContinuesBitIdentically) {
  TrainSummary full = run(config("full"));
  ExperimentConfig c = config("split");
  TrainSummary half = run(c, 4);
  EXPECT_EQ(half.steps_done, 4);
  TrainSummary rest = run(c, -1, true);
  EXPECT_EQ(rest.start_step, 4);
  EXPECT_EQ(rest.steps_done, 4);
  EXPECT_EQ(params_of(full.out_dir), params_of(c.train.out_dir));
  EXPECT_EQ(losses_of(full.out_dir), losses_of(c.train.out_dir));
  EXPECT_EQ(full.final_eval, rest.final_eval);
  // Resuming a finished run does nothing and still reports its final held-out loss.
  TrainSummary again = run(c, -1, true);
  EXPECT_EQ(again.steps_done, 0);
  EXPECT_EQ(again.final_eval, full.final_eval);
  h5::File f = h5::File::open(c.train.out_dir + "/log.h5");
  EXPECT_EQ(f.root().attr_string("status"), "finished");
}

// `bench train` reports the median of the timed steps: the summary lists each timed step (not the untimed
// warm-up ones), in order, and they add up to the timed seconds.
TEST_F(TrainerTest, TheSummaryListsEveryTimedStep) {
  ExperimentConfig c = config("timed");
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  opt.write_files = false;
  opt.stop_after = 5;
  opt.untimed_steps = 2;
  const TrainSummary s = train(c, ds, opt);
  EXPECT_EQ(s.steps_done, 5);
  ASSERT_EQ(s.step_seconds.size(), 3u);
  double total = 0;
  for (double t : s.step_seconds) {
    EXPECT_GT(t, 0.0);
    total += t;
  }
  EXPECT_DOUBLE_EQ(total, s.train_seconds);
  EXPECT_NEAR(s.train_tok_per_s, 3.0 * static_cast<double>(c.train.tokens_per_step) / s.train_seconds,
              1e-9 * s.train_tok_per_s);
}

TEST_F(TrainerTest, CheckpointRoundTripAndRefusals) {
  ExperimentConfig c = config("ckpt");
  run(c, 2);
  const std::string ck = c.train.out_dir + "/checkpoint.h5";
  EXPECT_TRUE(cfg::equal(checkpoint_config(ck), c));
  // Resuming with another config is refused.
  ExperimentConfig other = c;
  other.train.lr = 1e-3;
  EXPECT_THROW(run(other, -1, true), ConfigError);
  // A model of another shape cannot load it.
  ExperimentConfig wide = c;
  wide.model.d_model = 64;
  Transformer m(wide.model, 1);
  EXPECT_THROW(load_checkpoint(ck, m, nullptr), IoError);
  // Truncated and foreign files are refused with IoError.
  const std::string bad = (dir_ / "bad.h5").string();
  fs::copy_file(ck, bad);
  fs::resize_file(bad, fs::file_size(bad) / 3);
  EXPECT_THROW(checkpoint_config(bad), IoError);
  std::ofstream(bad) << "not a checkpoint";
  EXPECT_THROW(checkpoint_config(bad), IoError);
  h5::write_atomic(bad, [](const h5::Group& g) { g.set_attr("format", std::string("something-else")); });
  EXPECT_THROW(checkpoint_config(bad), IoError);
}

TEST_F(TrainerTest, NoValidationWindowIsRefusedBeforeTraining) {
  ExperimentConfig c = config("noval");
  c.data.val_tokens = c.model.context;  // one token short of a window
  try {
    run(c);
    ADD_FAILURE() << "a run without a validation window trained";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no validation window"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "noval" / "log.h5"));  // nothing that looks like a finished run
  // and at config time, before any data is opened: val_tokens 0 and one token short
  for (const char* v : {"data.val_tokens=0", "data.val_tokens=64"}) {
    try {
      load_experiment(PG_SOURCE_DIR "/configs/tiny.yaml",
                      {"tokenizer.vocab_size=1024", "model.vocab=1024", v, "model.context=64"});
      ADD_FAILURE() << v << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'data.val_tokens'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("holds no validation window"), std::string::npos) << e.what();
    }
  }
}

TEST_F(TrainerTest, DivergenceStopsWithAClearError) {
  ExperimentConfig c = config("nan");
  c.train.lr = 1e30;
  c.train.warmup_frac = 0;
  try {
    run(c);
    FAIL() << "expected divergence";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("diverged"), std::string::npos) << e.what();
  }
  h5::File f = h5::File::open(c.train.out_dir + "/log.h5");
  EXPECT_EQ(f.root().attr_string("status"), "diverged");
}

}  // namespace
}  // namespace pg
