// Tests of storage/export.h and `pagegram export`: a tiny trained checkpoint's table exported as NF4 and as
// MXFP8 files that hold exactly the table's round trip through the format, and the held-out loss comparison of fp32,
// NF4 and MXFP8 (measured on exactly the values the files hold, the fp32 table restored afterwards).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "storage/export.h"
#include "storage/table_file.h"
#include "train/config.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "tests/test_util.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

TEST(ExportLossLine, KeepsTheNf4LineAndAddsMxfp8) {
  TableLossComparison c;
  c.fp32 = 2.5;
  c.quantized = {{TableQuantization::kNf4, 2.5004}, {TableQuantization::kMxfp8, 2.49995}};
  EXPECT_EQ(c.loss(TableQuantization::kMxfp8), 2.49995);
  EXPECT_NEAR(c.difference(TableQuantization::kNf4), 0.0004, 1e-12);
  const std::string line = format_loss_comparison(c, 2048, 12.34);
  EXPECT_EQ(line,
            "held-out over 2048 windows: fp32 table 2.500000 nats, NF4 table 2.500400 nats, difference +0.000400 "
            "(report: +0.0004), MXFP8 table 2.499950 nats, MXFP8 - fp32 -0.000050 (12.3 s)");
  // experiments/nf4_runs.sh's sed patterns (greedy ".*difference") still find the NF4 numbers.
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, std::regex(".*difference ([-+0-9.]*).*")));
  EXPECT_EQ(m[1], "+0.000400");
  ASSERT_TRUE(std::regex_match(line, m, std::regex(".*NF4 table ([0-9.]*) nats.*")));
  EXPECT_EQ(m[1], "2.500400");
  ASSERT_TRUE(std::regex_match(line, m, std::regex(".*fp32 table ([0-9.]*) nats.*")));
  EXPECT_EQ(m[1], "2.500000");
}

class ExportTrained : public ::testing::Test {
 protected:
  // A tiny PageGram model trained for two steps; head rows of 40 values (neither a multiple of NF4's 64 nor of
  // MXFP8's 32: the last group / block of every row is short).
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun(
        "export", {"train.steps=4", "train.eval_interval=0", "train.eval_windows=8", "train.checkpoint_interval=0",
                   "memory.layout=pagegram", "memory.inject_layers=[0,1]", "memory.head_dim=40",
                   "memory.target_params=200000", "memory.lr_mult=200"});
    dir_ = tiny_.dir();
    cfg_ = tiny_.config("run");
    cfg_.train.threads = tiny_.base().train.threads;
    testing::TinyRun::train_run(cfg_, 2);
    checkpoint_ = (dir_ / "run" / "checkpoint.h5").string();
  }
  static void TearDownTestSuite() { tiny_.remove(); }

  static inline testing::TinyRun tiny_;
  static inline fs::path dir_;
  static inline ExperimentConfig cfg_;
  static inline std::string checkpoint_;
};

TEST_F(ExportTrained, BothFormatsHoldTheRoundTripAndTheLossIsMeasuredOnTheFileValues) {
  TrainedModel tm = load_trained_model(checkpoint_, {.open_data = true, .table_ready = true});
  ASSERT_TRUE(tm.mem());
  ASSERT_TRUE(tm.data);
  const MemoryLayout& L = tm.mem()->table().layout();
  ASSERT_EQ(L.width(), 40);
  std::span<float> values = tm.mem()->table().values();
  const std::vector<float> fp32(values.begin(), values.end());
  float amax = 0;
  for (float v : fp32) amax = std::max(amax, std::fabs(v));
  ASSERT_GT(amax, 0.0f) << "the trained table is all zero: nothing would be tested";

  data::ValidationWindows val = tm.data->validation(tm.cfg().model.context);
  const int64_t n = std::min<int64_t>(8, val.count());
  auto eval = [&] { return tm.session->evaluate(val, n, *tm.data->heldout); };

  // The loss with each file's values, read back row by row through the reader.
  std::vector<std::pair<TableQuantization, double>> file_loss;
  for (const TableQuantization q : {TableQuantization::kNf4, TableQuantization::kMxfp8}) {
    SCOPED_TRACE(quantization_name(q));
    const std::string path = (dir_ / ("t_" + quantization_name(q) + ".pgt")).string();
    TableWriteOptions opt;
    opt.quantization = q;
    opt.info = {{"source", checkpoint_}};
    const TableFileHeader h = export_table_file(path, L, fp32.data(), "zero", 0, opt);
    EXPECT_EQ(h.quantization, q);
    EXPECT_EQ(h.version, q == TableQuantization::kNf4 ? 1u : 2u);
    EXPECT_EQ(h.row_bytes, static_cast<uint64_t>(q == TableQuantization::kNf4 ? 34 : 42));  // 40 + 2 scale bytes
    verify_table_file(path, L, q);
    const TableFileReader r = TableFileReader::open(path, L, q);
    std::vector<float> expect = fp32;
    round_trip_table(q, expect.data(), L.rows(), L.width());
    int64_t changed = 0;
    for (int64_t row = 0; row < L.rows(); ++row) {
      r.read_row(row, values.data() + row * L.width());
      for (int64_t j = 0; j < L.width(); ++j) {
        const size_t i = static_cast<size_t>(row * L.width() + j);
        ASSERT_EQ(values[i], expect[i]) << "row " << row << " value " << j;
        changed += values[i] != fp32[i];
      }
    }
    EXPECT_GT(changed, 0);  // the format is lossy on a trained table: the loss comparison has something to show
    file_loss.push_back({q, eval()});
    std::copy(fp32.begin(), fp32.end(), values.begin());
  }

  const TableLossComparison c =
      compare_table_loss(values, L.rows(), L.width(), {TableQuantization::kNf4, TableQuantization::kMxfp8}, eval);
  ASSERT_EQ(c.quantized.size(), 2u);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], fp32[i]) << "fp32 table not restored at " << i;
  EXPECT_NEAR(eval(), c.fp32, 1e-9);
  for (const auto& [q, l] : file_loss) {
    SCOPED_TRACE(quantization_name(q));
    EXPECT_NEAR(c.loss(q), l, 1e-9);  // the comparison evaluates exactly what the file holds
    EXPECT_TRUE(std::isfinite(l));
    EXPECT_LT(std::fabs(l - c.fp32), 0.05);
  }
  // Each format changes the loss by a different amount (they are different tables), and a round trip that throws
  // leaves the fp32 table in place.
  EXPECT_NE(c.loss(TableQuantization::kNf4), c.loss(TableQuantization::kMxfp8));
  values[7] = std::nanf("");
  EXPECT_THROW(compare_table_loss(values, L.rows(), L.width(), {TableQuantization::kMxfp8}, eval), UserError);
  EXPECT_TRUE(std::isnan(values[7]));
  for (size_t i = 8; i < values.size(); ++i) ASSERT_EQ(values[i], fp32[i]) << i;
}

TEST_F(ExportTrained, CommandWritesEitherFormatAndReportsAllThreeLosses) {
  const std::string binary = PG_BINARY_DIR "/pagegram";
  if (!fs::exists(binary)) GTEST_SKIP() << binary << " is not built (cmake --build build --target pagegram)";
  auto run = [&](const std::string& args, const std::string& name) {
    const std::string out = (dir_ / (name + ".out")).string();
    const int rc =
        std::system((binary + " export --checkpoint " + checkpoint_ + " " + args + " > " + out + " 2>&1").c_str());
    return std::pair{rc, testing::slurp(out)};
  };
  const std::string mx = (dir_ / "cli_mx.pgt").string(), nf = (dir_ / "cli_nf.pgt").string();
  auto [rc, text] = run("--out " + mx + " --format mxfp8 --eval-windows 4 --threads 1", "mx");
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("(mxfp8, 42 bytes per row)"), std::string::npos) << text;
  EXPECT_NE(text.find("verified"), std::string::npos) << text;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m,
                                std::regex("held-out over 4 windows: fp32 table ([0-9.]+) nats, NF4 table "
                                           "([0-9.]+) nats, difference ([-+0-9.]+) \\(report: \\+0.0004\\), "
                                           "MXFP8 table ([0-9.]+) nats, MXFP8 - fp32 ([-+0-9.]+) \\(")))
      << text;
  const double fp32 = std::stod(m[1]), nf4 = std::stod(m[2]), mxfp8 = std::stod(m[4]);
  EXPECT_NEAR(std::stod(m[3]), nf4 - fp32, 2e-6);
  EXPECT_NEAR(std::stod(m[5]), mxfp8 - fp32, 2e-6);
  EXPECT_NE(nf4, mxfp8);
  const TableFileHeader h = TableFileReader::read_header(mx);
  EXPECT_EQ(h.quantization, TableQuantization::kMxfp8);
  EXPECT_EQ(h.identity_value("info.source"), checkpoint_);

  std::tie(rc, text) = run("--out " + nf + " --threads 1", "nf");  // the default stays NF4 (a version 1 file)
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("(nf4, 34 bytes per row)"), std::string::npos) << text;
  EXPECT_EQ(TableFileReader::read_header(nf).version, 1u);
  EXPECT_EQ(TableFileReader::read_header(nf).quantization, TableQuantization::kNf4);

  std::tie(rc, text) = run("--out " + nf + " --format fp8", "bad");
  EXPECT_NE(rc, 0);
  EXPECT_NE(text.find("fp8"), std::string::npos) << text;
}

}  // namespace
}  // namespace pg
