// Golden runs: 10 optimizer steps of configs/tiny.yaml (fixture corpus, d 64) with each memory layout, pinned bit
// for bit in tests/fixtures/golden/<layout>.txt: the training loss of every step (hex floats), the held-out
// loss, and a hash of every checkpoint dataset. The same files hold for every kernel ISA (kernels/kernels.h),
// so CI's second pass with PAGEGRAM_ISA=avx2 checks cross-ISA bit identity against the same numbers. A change
// that moves a bit fails here and names the first step and the datasets that moved. After an intended change,
// regenerate with PAGEGRAM_UPDATE_GOLDEN=1 (and say why in the commit).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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

uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// name -> value lines of a golden file (or of a fresh run)
using Record = std::map<std::string, std::string>;

std::string hex(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}

Record record_of(const std::string& out_dir) {
  Record r;
  {
    h5::File f = h5::File::open(out_dir + "/log.h5");
    const auto steps = f.root().sub("train").read<int64_t>("step");
    const auto loss = f.root().sub("train").read<double>("loss");
    for (size_t i = 0; i < loss.size(); ++i) {
      char k[32];
      std::snprintf(k, sizeof k, "loss.%03lld", static_cast<long long>(steps[i]));
      r[k] = hex(loss[i]);
    }
    const auto ev = f.root().sub("eval").read<double>("loss");
    r["eval.final"] = hex(ev.back());
  }
  h5::File f = h5::File::open(out_dir + "/checkpoint.h5");
  for (const char* g : {"params", "adam/m", "adam/v", "memory/dense"}) {
    h5::Group grp = f.root();
    bool ok = true;
    std::stringstream ss(g);
    for (std::string part; std::getline(ss, part, '/');) {
      if (!grp.has(part)) {
        ok = false;
        break;
      }
      grp = grp.sub(part);
    }
    if (!ok) continue;
    for (const auto& name : grp.children()) {
      const auto v = grp.read<float>(name);
      char h[32];
      std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(fnv1a(v.data(), v.size() * 4)));
      r[std::string("hash.") + g + "/" + name] = h;
    }
  }
  if (f.root().has("memory") && f.root().sub("memory").has("table")) {
    const auto t = f.root().sub("memory").sub("table").read<float>("table");
    char h[32];
    std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(fnv1a(t.data(), t.size() * 4)));
    r["hash.memory/table/table"] = h;
  }
  return r;
}

class GoldenRuns : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun(
        "golden", {"model.d_model=64", "model.context=64", "train.steps=10", "train.tokens_per_step=2048",
                   "train.micro_batch=16", "train.eval_interval=5", "train.eval_windows=16",
                   "train.checkpoint_interval=0", "train.log_interval=1", "memory.inject_layers=[0,1]",
                   "memory.target_params=300000", "memory.heads=4", "memory.head_dim=32", "train.threads=2"});
    dir_ = tiny_.dir();
    base_ = tiny_.base();
  }
  static void TearDownTestSuite() { tiny_.remove(); }
  static inline testing::TinyRun tiny_;
  static inline fs::path dir_;
  static inline ExperimentConfig base_;
};

TEST_P(GoldenRuns, TenStepsMatchTheGoldenFileBitForBit) {
  const std::string layout = GetParam();
  const std::string file = std::string(PG_TEST_DATA) + "/golden/" + layout + ".txt";
  ExperimentConfig c = base_;
  c.memory.layout = layout;  // pagegram: S = 4 (tiny.yaml's memory.slots)
  c.train.out_dir = (dir_ / layout).string();
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  train(c, ds, opt);
  const Record got = record_of(c.train.out_dir);
  ASSERT_GE(got.size(), 20u);

  if (const char* u = std::getenv("PAGEGRAM_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream o(file);
    o << "# golden run (tests/train/golden_test.cpp), layout " << layout << ", written with kernels "
      << kern::active_name() << "\n";
    for (const auto& [k, v] : got) o << k << " " << v << "\n";
    ASSERT_TRUE(o.good()) << file;
    GTEST_SKIP() << "wrote " << file;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in) << "missing " << file << " (regenerate with PAGEGRAM_UPDATE_GOLDEN=1)";
  Record want;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.find(' ');
    want[line.substr(0, sp)] = line.substr(sp + 1);
  }
  EXPECT_EQ(got.size(), want.size());
  std::string first_loss, moved;
  int n_moved = 0;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it != got.end() && it->second == v) continue;
    if (k.rfind("loss.", 0) == 0 && first_loss.empty()) first_loss = k;
    if (n_moved++ < 6) moved += " " + k;
  }
  EXPECT_EQ(n_moved, 0) << layout << " (kernels " << kern::active_name() << "): " << n_moved
                        << " golden values moved; first training loss that moved: "
                        << (first_loss.empty() ? "none" : first_loss) << "; moved:" << moved
                        << " (an intended change: PAGEGRAM_UPDATE_GOLDEN=1)";
}

// Every registered layout (and none): a layout added to the registry fails here until its golden file exists.
INSTANTIATE_TEST_SUITE_P(Layouts, GoldenRuns, ::testing::ValuesIn(memory_layout_choices()));

}  // namespace
}  // namespace pg
