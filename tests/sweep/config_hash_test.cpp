// Config hashes of recorded runs do not move when a key is added: the committed record of a finished run
// (experiments/regime_stage1/records/flat-s0-67f26ecb.json, written before train.precision existed) still hashes
// to its recorded value; a non-default precision changes the hash (it changes the results).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "sweep/spec.h"
#include "train/config.h"

namespace pg {
namespace {

TEST(ConfigHash, CommittedRecordKeepsItsHashAndBf16ChangesIt) {
  const YAML::Node rec = YAML::LoadFile(PG_SOURCE_DIR "/experiments/regime_stage1/records/flat-s0-67f26ecb.json");
  ASSERT_EQ(rec["config_hash"].as<std::string>(), "67f26ecb");
  ExperimentConfig c = parse_experiment(rec["config"].as<std::string>(), "record");
  EXPECT_EQ(c.train.precision, "fp32");
  EXPECT_EQ(config_hash(c), "67f26ecb");
  c.train.precision = "bf16";
  EXPECT_NE(config_hash(c), "67f26ecb");
}

}  // namespace
}  // namespace pg
