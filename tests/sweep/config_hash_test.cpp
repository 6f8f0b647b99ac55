// Config hashes of recorded runs do not move when a key is added: a record of a finished run written before
// train.precision existed (tests/fixtures/records/regime_stage1-flat-s0-67f26ecb.json, a copy of regime_stage1's
// first record, kept here since that sweep was rerun in session 15) still hashes
// to its recorded value; a non-default precision changes the hash (it changes the results). A run directory's
// config.yaml leaves such keys out at their default, so the build that recorded the earlier runs can run it.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

#include "sweep/spec.h"
#include "sweep/status.h"
#include "tests/test_util.h"
#include "train/config.h"

namespace pg {
namespace {

const char* const kOldRecord = PG_SOURCE_DIR "/tests/fixtures/records/regime_stage1-flat-s0-67f26ecb.json";

TEST(ConfigHash, CommittedRecordKeepsItsHashAndBf16ChangesIt) {
  const YAML::Node rec = YAML::LoadFile(kOldRecord);
  ASSERT_EQ(rec["config_hash"].as<std::string>(), "67f26ecb");
  ExperimentConfig c = parse_experiment(rec["config"].as<std::string>(), "record");
  EXPECT_EQ(c.train.precision, "fp32");
  EXPECT_EQ(config_hash(c), "67f26ecb");
  c.train.precision = "bf16";
  EXPECT_NE(config_hash(c), "67f26ecb");
}

TEST(ConfigHash, ARunConfigLeavesLateKeysOutAtTheirDefault) {
  const YAML::Node rec = YAML::LoadFile(kOldRecord);
  const std::filesystem::path dir = testing::make_temp_dir("runcfg");
  for (const std::string prec : {"fp32", "bf16"}) {
    SweepRun run;
    run.name = "r-" + prec;
    run.config = parse_experiment(rec["config"].as<std::string>(), "record");
    run.config.train.precision = prec;
    run.hash = config_hash(run.config);
    run.dir = (dir / run.name).string();
    write_run_config(run);
    const std::string text = testing::slurp(run.dir + "/config.yaml");
    EXPECT_EQ(text.find("precision") == std::string::npos, prec == "fp32") << text;
    const ExperimentConfig back = parse_experiment(text, "config.yaml");  // reads back as the same run
    EXPECT_EQ(back.train.precision, prec);
    EXPECT_EQ(config_hash(back), run.hash);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pg
