// The tiny training run the training tests start from: configs/tiny.yaml on the fixture corpus (tiny_fixture_sets)
// with a suite's own overrides, its data tokenized once into the suite's own cache, one run directory per run.
// A suite holds one TinyRun, made in SetUpTestSuite and removed in TearDownTestSuite.
#pragma once
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "data/pipeline.h"
#include "tests/test_util.h"
#include "train/config.h"
#include "train/trainer.h"

namespace pg::testing {

class TinyRun {
 public:
  TinyRun() = default;
  // A fresh folder <tmp>/pg_<tag>_<pid>, configs/tiny.yaml with the fixture data and `sets` (applied after the
  // fixture's own), and its data tokenized there.
  TinyRun(const std::string& tag, const std::vector<std::string>& sets)
      : dir_(make_temp_dir(tag)), base_(load_experiment(kTinyConfig, with_sets(tiny_fixture_sets(dir_), sets))) {
    data::tokenize(base_.data, base_.tokenizer);
  }
  const std::filesystem::path& dir() const { return dir_; }
  const ExperimentConfig& base() const { return base_; }
  // The base config training into dir()/run with `threads` (0: every allowed CPU).
  ExperimentConfig config(const std::string& run, int64_t threads = 0) const {
    ExperimentConfig c = base_;
    c.train.out_dir = (dir_ / run).string();
    c.train.threads = threads;
    return c;
  }
  // Trains `c` on its data without a progress line; stop_after and resume as in TrainOptions.
  static TrainSummary train_run(const ExperimentConfig& c, int64_t stop_after = -1, bool resume = false) {
    data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    opt.stop_after = stop_after;
    opt.resume = resume;
    return train(c, ds, opt);
  }
  void remove() const {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::filesystem::path dir_;
  ExperimentConfig base_;
};

}  // namespace pg::testing
