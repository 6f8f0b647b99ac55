// BF16 mixed precision (train.precision: bf16, kernels/gemm.h): a bf16 run is bit-identical for 1 and 2 threads, and
// it follows the fp32 run of the same config with every memory layout (30 steps of configs/tiny.yaml at d 64) in both
// summation orders; the key is checked like the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/h5.h"
#include "kernels/kernels.h"
#include "data/pipeline.h"
#include "train/config.h"
#include "train/trainer.h"
#include "tests/test_util.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class Bf16Train : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun(
        "bf16", {"model.d_model=64", "model.context=64", "train.steps=50", "train.tokens_per_step=2048",
                 "train.micro_batch=16", "train.eval_interval=0", "train.eval_windows=16",
                 "train.checkpoint_interval=0", "train.log_interval=1", "memory.inject_layers=[0,1]",
                 "memory.target_params=300000", "memory.heads=4", "memory.head_dim=32", "train.threads=2"});
    dir_ = tiny_.dir();
    base_ = tiny_.base();
  }
  static void TearDownTestSuite() { tiny_.remove(); }

  struct Run {
    std::vector<double> loss;
    double eval = 0;
    std::vector<float> params;
  };
  // Each run in a directory of its own (`tag` tells apart runs of the same key in other kernel orders).
  static Run run(const std::string& layout, const std::string& precision, int64_t threads, int64_t steps,
                 const std::string& tag = "") {
    ExperimentConfig c = base_;
    c.memory.layout = layout;
    c.train.precision = precision;
    c.train.threads = threads;
    c.train.steps = steps;
    c.train.out_dir =
        (dir_ / (layout + "_" + precision + tag + "_" + std::to_string(threads) + "_" + std::to_string(steps)))
            .string();
    data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    const TrainSummary s = train(c, ds, opt);
    Run r;
    h5::File log = h5::File::open(c.train.out_dir + "/log.h5");
    r.loss = log.root().sub("train").read<double>("loss");
    r.eval = s.final_eval;
    h5::File ck = h5::File::open(c.train.out_dir + "/checkpoint.h5");
    h5::Group p = ck.root().sub("params");
    for (const auto& name : p.children()) {
      const auto v = p.read<float>(name);
      r.params.insert(r.params.end(), v.begin(), v.end());
    }
    return r;
  }
  static inline testing::TinyRun tiny_;
  static inline fs::path dir_;
  static inline ExperimentConfig base_;
};

TEST_F(Bf16Train, OneAndTwoThreadsGiveTheSameBits) {
  for (const char* precision : {"bf16", "autocast"}) {
    SCOPED_TRACE(precision);
    const Run a = run("pagegram", precision, 1, 3), b = run("pagegram", precision, 2, 3);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.params, b.params);
    EXPECT_EQ(a.eval, b.eval);
  }
}

// Tolerance, from measurement (Zen 5, 2026-12-01; 50 steps, d 64, 2 layers, 2,048 tokens per step; the same bits
// for VDPBF16PS and the emulation): the largest per-step |loss_bf16 - loss_fp32| was 0.0003 (none), 0.0006 (flat),
// 0.0005 (engram, pagegram), and the final held-out losses differed by at most 0.0002, while the loss falls from
// 6.9 to 2.2-3.7 nats. bf16 keeps 8 significant bits (GEMM outputs move by ~2^-9 relative) and the curves drift
// apart slowly; the bounds below are ~8x the measured per-step gap and 10x the held-out gap: room for another
// seed, corpus or compiler, small enough that a bf16 path that loses accuracy (truncating instead of rounding,
// a wrong pair, an fp16-sized error) would show. The tests run 30 steps (CI time; the gaps only grow with steps):
// Zen 4, 2026-12-07, the largest per-step gap 0.0002-0.0004 in this CPU's order and 0.0003-0.0004 in the AMX order,
// held-out within 0.0002, the loss falling from 6.9 to 3.7-4.8 nats.
constexpr int64_t kSteps = 30;
constexpr double kStepTolerance = 0.005;
constexpr double kEvalTolerance = 0.002;

// Restores the bf16 kernel choice of the environment (PAGEGRAM_BF16) when a test that switched it ends.
struct RestoreBf16 {
  ~RestoreBf16() {
    const char* env = std::getenv("PAGEGRAM_BF16");
    kern::select_bf16(env ? env : "auto");
  }
};

// One layout per test (the layouts run side by side under ctest): the fp32 run once, then bf16 in this CPU's order
// (VDPBF16PS or its emulation) and in the AMX order (kernels/gemm.h; PAGEGRAM_BF16=amx-emulated, the tiles' bits
// on any machine), and autocast (train.precision: autocast) in this CPU's order; all follow fp32 within the same
// tolerances.
class Bf16Follows : public Bf16Train, public ::testing::WithParamInterface<std::string> {};

TEST_P(Bf16Follows, Fp32InBothSummationOrdersAndAutocast) {
  RestoreBf16 restore;
  const std::string layout = GetParam();
  const Run f = run(layout, "fp32", 2, kSteps);
  ASSERT_EQ(f.loss.size(), static_cast<size_t>(kSteps));
  const char* env = std::getenv("PAGEGRAM_BF16");  // this CPU's order, or the one the environment asks for
  const char* own = env ? env : "auto";
  for (const auto& [precision, order] :
       {std::pair<const char*, const char*>{"bf16", own}, {"bf16", "amx-emulated"}, {"autocast", own}}) {
    SCOPED_TRACE(std::string(precision) + " " + order);
    kern::select_bf16(order);
    const Run h = run(layout, precision, 2, kSteps, order);
    ASSERT_EQ(h.loss.size(), static_cast<size_t>(kSteps));
    double worst = 0;
    for (size_t i = 0; i < f.loss.size(); ++i) worst = std::max(worst, std::fabs(f.loss[i] - h.loss[i]));
    EXPECT_LE(worst, kStepTolerance);
    EXPECT_NEAR(h.eval, f.eval, kEvalTolerance);
    EXPECT_LT(h.loss.back(), h.loss.front() - 1.0);  // it learns
    EXPECT_NE(f.loss, h.loss);  // and really ran in bf16
    std::printf("[%s %s vs fp32] %-8s max |d loss| %.4f  final eval fp32 %.4f, %.4f\n", precision, order,
                layout.c_str(), worst, f.eval, h.eval);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16Follows, ::testing::ValuesIn(memory_layout_choices()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The AMX order has its own bits (another summation order than VDPBF16PS), the same for 1 and 2 threads.
TEST_F(Bf16Train, AmxOrderIsItsOwnAndThreadIndependent) {
  RestoreBf16 restore;
  const Run vdp = run("pagegram", "bf16", 2, 3);
  kern::select_bf16("amx-emulated");
  const Run a = run("pagegram", "bf16", 1, 3, "amx"), b = run("pagegram", "bf16", 2, 3, "amx");
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.params, b.params);
  EXPECT_NE(a.params, vdp.params);
}

TEST(Bf16Config, PrecisionIsCheckedLikeEveryKey) {
  try {
    load_experiment(testing::kTinyConfig, {"train.precision=fp16"});
    FAIL() << "fp16 accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train.precision"), std::string::npos) << m;
    EXPECT_NE(m.find("fp32, bf16 or autocast"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_EQ(load_experiment(testing::kTinyConfig).train.precision, "fp32");
  EXPECT_TRUE(load_experiment(testing::kTinyConfig, {"train.precision=bf16"}).train.bf16());
  const TrainConfig ac = load_experiment(testing::kTinyConfig, {"train.precision=autocast"}).train;
  EXPECT_TRUE(ac.bf16());  // bf16 GEMMs
  EXPECT_TRUE(ac.autocast());
  EXPECT_FALSE(load_experiment(testing::kTinyConfig, {"train.precision=bf16"}).train.autocast());
}

}  // namespace
}  // namespace pg
