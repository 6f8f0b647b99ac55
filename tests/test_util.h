// Helpers every test suite shares: per-test temporary directories, writing and reading small text files, and the
// tiny fixture config (configs/tiny.yaml: d 64, the fixture corpus) the training and sweep tests start from.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

// A per-test temporary directory named after the running test, removed when the test ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() : path(make_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
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

}  // namespace pg::testing
