// Seeded mutation fuzzing of every reader of user input: config files and --set values, sweep files,
// token stores, checkpoints and table files (.pgt, NF4 and MXFP8). Seeds: the committed presets (configs/**.yaml) and
// sweep files (experiments/*/sweep.yaml); binary seeds are generated deterministically from the committed fixture
// corpus. Each mutant must either load or be refused with a UserError (one line: what, where, hint); an InternalError,
// any other exception or a crash is a finding. Case counts are bounded for CI; PAGEGRAM_FUZZ_CASES=N sets
// each fuzzer's count to N (TableFiles: N/2 per format). Seed files are taken in sorted order, so the same tree
// gives the same mutants on any filesystem.
// Findings are pinned as regression tests in tests/core/robustness_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "data/pipeline.h"
#include "data/token_store.h"
#include "model/transformer.h"
#include "storage/export.h"
#include "storage/table_file.h"
#include "storage/table_source.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "sweep/spec.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "tests/test_util.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

int64_t cases(int64_t dflt) {
  const char* e = std::getenv("PAGEGRAM_FUZZ_CASES");
  return e ? std::max<int64_t>(1, std::atoll(e)) : dflt;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// One mutation of `s`: byte flips, deletions, duplications, splices of YAML-significant tokens.
std::string mutate(std::string s, std::mt19937_64& rng, bool text) {
  static const char* tokens[] = {":", " ",  "\n",     "-",      "[",     "]",        "{",
                                 "}", "? ", "---\n",  "&a ",    "*a",    "!!int ",   "\"",
                                 "'", "#",  "1e309",  "-1",     "nan",   ".inf",     "0x7fffffffffffffff",
                                 "~", "\t", "base: ", "<<: *a", "|\n  ", "\xff\xfe", "999999999999999999999"};
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < n && !s.empty(); ++k) {
    const size_t at = rng() % s.size();
    switch (rng() % (text ? 5 : 3)) {
      case 0:
        s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
        break;
      case 1:
        s.erase(at, 1 + rng() % 8);
        break;
      case 2:
        s[at] = static_cast<char>(rng());
        break;
      case 3:
        s.insert(at, tokens[rng() % (sizeof(tokens) / sizeof(*tokens))]);
        break;
      default: {  // duplicate a line
        const size_t b = s.rfind('\n', at), e = s.find('\n', at);
        const size_t from = b == std::string::npos ? 0 : b + 1, to = e == std::string::npos ? s.size() : e;
        s.insert(from, s.substr(from, to - from) + "\n");
      }
    }
  }
  return s;
}

// Runs f; returns "" when it succeeded or threw a UserError, else a description of the finding.
template <class F>
std::string outcome(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string m = e.what();
    if (m.find('\n') != std::string::npos) return "multi-line error: " + m;
    return "";
  } catch (const InternalError& e) {
    return std::string("internal check: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("uncaught exception: ") + e.what();
  }
  return "";
}

// A scratch copy of configs/ and the sweep files (mutants are written there, never into the source tree, where
// other tests list the presets).
struct FuzzDir {
  fs::path p = fs::temp_directory_path() / ("pg_fuzz_" + std::to_string(::getpid()));
  FuzzDir() {
    fs::create_directories(p / "experiments");
    fs::copy(PG_SOURCE_DIR "/configs", p / "configs", fs::copy_options::recursive);
    for (const auto& e : fs::directory_iterator(PG_SOURCE_DIR "/experiments"))
      if (fs::exists(e.path() / "sweep.yaml")) {
        fs::create_directories(p / "experiments" / e.path().filename());
        fs::copy_file(e.path() / "sweep.yaml", p / "experiments" / e.path().filename() / "sweep.yaml");
      }
  }
  ~FuzzDir() { fs::remove_all(p); }
};

TEST(Fuzz, ConfigFilesAndSetValues) {
  FuzzDir d;
  std::vector<std::string> seeds;
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator(d.p / "configs"))
    if (e.path().extension() == ".yaml") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());  // directory order differs between filesystems
  for (const auto& q : paths) seeds.push_back(slurp(q));
  ASSERT_GE(seeds.size(), 10u);
  // presets name their base relative to configs/: put the mutants there too
  const fs::path where = d.p / "configs" / "mutant.yaml";
  std::mt19937_64 rng(1);
  const int64_t n = cases(1500);
  int64_t refused = 0, loaded = 0;
  std::vector<std::string> findings;
  for (int64_t i = 0; i < n; ++i) {
    const std::string text = mutate(seeds[rng() % seeds.size()], rng, true);
    spit(where, text);
    if (std::getenv("PAGEGRAM_FUZZ_TRACE")) spit(std::getenv("PAGEGRAM_FUZZ_TRACE"), text);
    bool ok = false;
    const std::string f = outcome([&] {
      load_experiment(where.string());
      ok = true;
    });
    (ok ? loaded : refused)++;
    if (!f.empty() && findings.size() < 5) findings.push_back(f + "\n--- input ---\n" + text);
    // the same text as a --set value of a section
    const std::string g =
        outcome([&] { load_experiment((d.p / "configs" / "tiny.yaml").string(), {"model=" + text}); });
    if (!g.empty() && findings.size() < 5) findings.push_back("--set model=...: " + g + "\n--- value ---\n" + text);
  }
  std::printf("[fuzz] config: %ld mutants x 2 (file, --set), %ld loaded, %ld refused, %zu findings\n", long(n),
              long(loaded), long(refused), findings.size());
  for (const auto& f : findings) ADD_FAILURE() << f;
}

TEST(Fuzz, SweepFiles) {
  FuzzDir d;
  std::vector<fs::path> seeds;
  for (const auto& e : fs::directory_iterator(d.p / "experiments"))
    if (fs::exists(e.path() / "sweep.yaml")) seeds.push_back(e.path() / "sweep.yaml");
  std::sort(seeds.begin(), seeds.end());
  ASSERT_GE(seeds.size(), 3u);
  std::mt19937_64 rng(2);
  const int64_t n = cases(600);
  std::vector<std::string> findings;
  for (int64_t i = 0; i < n; ++i) {
    const fs::path seed = seeds[rng() % seeds.size()];
    const std::string text = mutate(slurp(seed), rng, true);
    const fs::path p = seed.parent_path() / "mutant.yaml";
    spit(p, text);
    const std::string f = outcome([&] {
      SweepSpec s = load_sweep(p.string());
      expand_sweep(s);
    });
    fs::remove(p);
    if (!f.empty() && findings.size() < 5) findings.push_back(f + "\n--- input ---\n" + text);
  }
  std::printf("[fuzz] sweep files: %ld mutants, %zu findings\n", long(n), findings.size());
  for (const auto& f : findings) ADD_FAILURE() << f;
}

class FuzzBinary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pg_fuzzbin_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    cfg_ = load_experiment(
        PG_SOURCE_DIR "/configs/tiny.yaml",
        testing::with_sets(
            testing::tiny_fixture_sets(dir_),
            {"train.steps=2", "train.eval_interval=0", "train.eval_windows=4", "memory.layout=pagegram",
             "memory.inject_layers=[0,1]", "memory.target_params=100000", "train.out_dir=" + (dir_ / "run").string()}));
    stores_ = data::tokenize(cfg_.data, cfg_.tokenizer);
    data::DataSet ds = data::open_dataset(cfg_.data, cfg_.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    train(cfg_, ds, opt);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
  static inline ExperimentConfig cfg_;
  static inline data::TokenizeSummary stores_;
};

TEST_F(FuzzBinary, TokenStores) {
  const std::string good = slurp(stores_.heldout_path);
  ASSERT_GT(good.size(), 1000u);
  std::mt19937_64 rng(3);
  const int64_t n = cases(300);
  std::vector<std::string> findings;
  int64_t refused = 0;
  const fs::path p = dir_ / "mut.pgtok";
  for (int64_t i = 0; i < n; ++i) {
    // mostly the header and offsets (the first KiB), sometimes anywhere
    std::string s = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % 4 ? rng() % std::min<size_t>(1024, s.size()) : rng() % s.size();
      s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
    }
    if (rng() % 8 == 0) s.resize(rng() % s.size());
    spit(p, s);
    bool ok = false;
    const std::string f = outcome([&] {
      data::TokenStore::open(p.string());
      ok = true;
    });
    refused += !ok;
    if (!f.empty() && findings.size() < 5) findings.push_back(f);
  }
  std::printf("[fuzz] token stores: %ld mutants, %ld refused, %zu findings\n", long(n), long(refused), findings.size());
  EXPECT_GT(refused, n * 9 / 10);  // the checksums catch nearly every flip
  for (const auto& f : findings) ADD_FAILURE() << f;
}

TEST_F(FuzzBinary, Checkpoints) {
  const std::string path = (dir_ / "run" / "checkpoint.h5").string();
  const std::string good = slurp(path);
  std::mt19937_64 rng(4);
  const int64_t n = cases(120);
  std::vector<std::string> findings;
  int64_t refused = 0;
  const fs::path p = dir_ / "mut.h5";
  for (int64_t i = 0; i < n; ++i) {
    std::string s = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % s.size();
      s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
    }
    if (rng() % 10 == 0) s.resize(rng() % s.size());
    spit(p, s);
    bool ok = false;
    const std::string f = outcome([&] {
      const ExperimentConfig c = checkpoint_config(p.string());
      Transformer model(c.model, c.train.micro_batch);
      load_checkpoint(p.string(), model, nullptr, nullptr);
      ok = true;
    });
    refused += !ok;
    if (!f.empty() && findings.size() < 5) findings.push_back(f);
  }
  std::printf("[fuzz] checkpoints: %ld mutants, %ld refused, %zu findings\n", long(n), long(refused), findings.size());
  for (const auto& f : findings) ADD_FAILURE() << f;
}

TEST_F(FuzzBinary, TableFiles) {
  // The trained table exported in both formats; a mutant must be refused (open(), verify_all or a table source's
  // fetch: IoError naming what) or, when the flips hit bytes no reader uses (header padding), read exactly the
  // original rows: never garbage, never a crash.
  TrainedModel tm =
      load_trained_model((dir_ / "run" / "checkpoint.h5").string(), {.open_data = false, .table_ready = true});
  const MemoryLayout& L = tm.mem()->table().layout();
  std::mt19937_64 rng(5);
  const int64_t n = cases(160);
  std::vector<std::string> findings;
  int64_t refused = 0, data_flips = 0;
  auto rows_of = [&](const std::string& path) {
    std::unique_ptr<TableSource> m = mmap_table_source(path, L, false);
    Addresses a;
    a.resize(1, L);
    std::vector<float> all;
    for (int64_t row = 0; row < L.rows(); row += 1 + L.rows() / 97) {
      std::fill(a.rows.begin(), a.rows.end(), row);
      std::vector<float> out(static_cast<size_t>(a.heads * L.width()));
      m->fetch(a, out.data());
      all.insert(all.end(), out.begin(), out.end());
    }
    return all;
  };
  for (const TableQuantization q : {TableQuantization::kNf4, TableQuantization::kMxfp8}) {
    const fs::path src = dir_ / (quantization_name(q) + ".pgt");
    TableWriteOptions o;
    o.quantization = q;
    export_table_file(src.string(), L, tm.mem()->table().values().data(), "zero", 0, o);
    const std::string good = slurp(src);
    const TableFileHeader h = TableFileReader::read_header(src.string());
    const std::vector<float> want = rows_of(src.string());
    const fs::path p = dir_ / "mut.pgt";
    for (int64_t i = 0; i < n / 2; ++i) {
      std::string s = good;
      const int flips = 1 + static_cast<int>(rng() % 3);
      bool in_data = false;
      for (int k = 0; k < flips; ++k) {  // mostly the header blocks, sometimes anywhere
        const size_t at = rng() % 3 ? rng() % std::min<size_t>(8192, s.size()) : rng() % s.size();
        s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
        in_data |= at >= h.data_offset();
      }
      if (rng() % 8 == 0) s.resize(rng() % s.size());
      spit(p, s);
      data_flips += in_data;
      bool ok = false;
      std::vector<float> got;
      const std::string f = outcome([&] {
        TableFileReader r = TableFileReader::open(p.string(), L);
        r.verify_all();
        got = rows_of(p.string());
        ok = true;
      });
      refused += !ok;
      if (!f.empty() && findings.size() < 5) findings.push_back(quantization_name(q) + ": " + f);
      if (ok && in_data && findings.size() < 5)
        findings.push_back(quantization_name(q) + ": a flipped data block was accepted");
      if (ok && got != want && findings.size() < 5)
        findings.push_back(quantization_name(q) + ": accepted with other rows");
    }
  }
  std::printf("[fuzz] table files: %ld mutants (%ld with a data-block flip), %ld refused, %zu findings\n",
              long(n / 2 * 2), long(data_flips), long(refused), findings.size());
  EXPECT_GT(refused, data_flips);  // every data flip, and header flips where a reader looks
  for (const auto& f : findings) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace pg
