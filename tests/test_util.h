// Helpers every test suite shares: per-test temporary directories, writing and reading small text files, and the
// tiny fixture config (configs/tiny.yaml: d 64, the fixture corpus) the training and sweep tests start from.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pg::testing {

// configs/tiny.yaml of this checkout.
inline const std::string kTinyConfig = PG_SOURCE_DIR "/configs/tiny.yaml";

// A fresh, empty directory <tmp>/pg_<tag>_<pid> (an older one of that name is removed first).
inline std::filesystem::path make_temp_dir(const std::string& tag) {
  std::filesystem::path d = std::filesystem::temp_directory_path() / ("pg_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A temporary directory named after the running test (and numbered: a test may hold several), removed with it.
struct TempDir {
  std::filesystem::path path;
  TempDir() : path(make_temp_dir(name())) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

 private:
  static std::string name() {
    static int serial = 0;
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(t ? t->name() : "suite") + "_" + std::to_string(serial++);
  }
};

// Writes `text` to `p` (truncating); returns the path as a string.
inline std::string write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p.string();
}

// The whole file as a string, "" when it cannot be read (for diagnostics of failed expectations too).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The overrides that point configs/tiny.yaml at the fixture corpus (tests/fixtures/corpus) with its data cache in
// `dir`/cache and a 1,024-piece tokenizer: the data every training test shares (tokenized once per cache).
inline std::vector<std::string> tiny_fixture_sets(const std::filesystem::path& dir) {
  return {"data.cache_dir=" + (dir / "cache").string(),
          "data.corpus=" PG_TEST_DATA "/corpus",
          "tokenizer.vocab_size=1024",
          "model.vocab=1024",
          "tokenizer.input_sentence_size=4000",
          "data.val_tokens=2048"};
}

// n floats drawn from N(0, 1) by mt19937(seed): the random matrices of the kernel and model tests.
inline std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// `base` followed by `more` (a fixture's own --set overrides after the shared ones).
inline std::vector<std::string> with_sets(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace pg::testing
