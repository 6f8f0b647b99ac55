// core/text.h: the one duration and count format, JSON escaping, atomic text writes and a log file's tail.
#include "core/text.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/test_util.h"

namespace pg {
namespace {

TEST(Text, DurationsRoundToTheNearestSecond) {
  EXPECT_EQ(fmt_duration(0), "0m00s");
  EXPECT_EQ(fmt_duration(59.4), "0m59s");
  EXPECT_EQ(fmt_duration(59.5), "1m00s");
  EXPECT_EQ(fmt_duration(3599.6), "1h00m");
  EXPECT_EQ(fmt_duration(3 * 3600 + 7 * 60 + 5), "3h07m");
  EXPECT_EQ(fmt_duration(-1), "?");
  EXPECT_EQ(fmt_duration(1.0 / 0.0), "?");
}

TEST(Text, CountsHaveFourSignificantDigits) {
  EXPECT_EQ(format_count(512), "512");
  EXPECT_EQ(format_count(12500), "12.5K");
  EXPECT_EQ(format_count(2e8), "200M");
  EXPECT_EQ(format_count(3.2e9), "3.2B");
  EXPECT_EQ(format_count(2.105e6), "2.105M");
  EXPECT_EQ(format_count(1.5e12), "1.5T");
}

TEST(Text, JsonEscape) {
  EXPECT_EQ(json_escape("plain"), "\"plain\"");
  EXPECT_EQ(json_escape("a\"b\\c\nd\te\r"), "\"a\\\"b\\\\c\\nd\\te\\r\"");
  EXPECT_EQ(json_escape(std::string("\x01", 1)), "\"\\u0001\"");
}

TEST(Text, ShellQuoteGivesOneWordTheShellReadsBack) {
  EXPECT_EQ(shell_quote("configs/tiny.yaml"), "configs/tiny.yaml");
  EXPECT_EQ(shell_quote("train.out_dir=/tmp/run-1"), "train.out_dir=/tmp/run-1");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("with space/ünï"), "'with space/ünï'");
  EXPECT_EQ(shell_quote("memory.inject_layers=[0,1]"), "'memory.inject_layers=[0,1]'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  // The shell reads each back as the one word it was.
  for (const std::string w : {"a b", "it's", "$HOME", "x;y", "ünï cødé", "[0,1]"}) {
    const std::string cmd = "printf %s " + shell_quote(w);
    FILE* f = ::popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[256] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    ::pclose(f);
    EXPECT_EQ(std::string(buf, n), w) << cmd;
  }
}

TEST(Text, AtomicWriteReadAndTail) {
  testing::TempDir tmp;
  const std::string p = (tmp.path / "sub" / "f.txt").string();
  write_text_atomic(p, "one\ntwo\rTWO\nthree\n");
  EXPECT_EQ(read_file(p), "one\ntwo\rTWO\nthree\n");
  EXPECT_EQ(tail_lines(p, 2), "    | TWO\n    | three\n");  // a terminal line keeps its last '\r' segment
  write_text_atomic(p, "new");
  EXPECT_EQ(read_file(p), "new");
  for (const auto& e : std::filesystem::directory_iterator(tmp.path / "sub"))
    EXPECT_EQ(e.path().filename(), "f.txt") << "a temp file was left behind";
  EXPECT_THROW(read_file((tmp.path / "missing").string()), IoError);
  EXPECT_NE(tail_lines((tmp.path / "missing").string(), 3).find("no output file"), std::string::npos);
}

}  // namespace
}  // namespace pg
