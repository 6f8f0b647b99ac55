// Regression tests for core: config files and --set values that used to crash or be silently
// accepted, and HDF5 writes that fail (file size limit = a full disk) without losing the previous file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/h5.h"
#include "core/text.h"
#include "tests/test_util.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;
// Writes `text` to <d>/<name>; returns the path.
std::string write(const TempDir& d, const std::string& name, const std::string& text) {
  return testing::write_text(d.path / name, text);
}

std::string config_error(const std::string& path, const std::vector<std::string>& sets = {}) {
  try {
    cfg::load_file(path, sets);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(CoreRobustness, BadConfigFilesAreOneLineErrorsNotCrashes) {
  TempDir d;
  const std::string ok = write(d, "ok.yaml", "model:\n  layers: 2\n");
  EXPECT_NE(config_error(write(d, "dir.yaml", "base: " + d.path.string() + "\n")).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(config_error(write(d, "cx.yaml", "? [a, b]\n: 3\n")).find("cx.yaml:1:3: a complex (non-scalar) key"),
            std::string::npos)
      << config_error(d.path / "cx.yaml");
  EXPECT_NE(
      config_error(write(d, "dup.yaml", "model:\n  layers: 2\n  layers: 3\n")).find("key 'model.layers' appears twice"),
      std::string::npos);
  EXPECT_NE(config_error(write(d, "empty.yaml", "")).find("empty config file"), std::string::npos);
  EXPECT_NE(config_error(write(d, "two.yaml", "a: 1\n---\nb: 2\n")).find("several YAML documents"), std::string::npos);
  EXPECT_NE(config_error(ok, {"model={[1]: 3}"}).find("complex (non-scalar) key"), std::string::npos);
  const std::string multi = config_error(ok, {"model.layers=3\n---\n4"});
  EXPECT_NE(multi.find("several YAML documents"), std::string::npos) << multi;
  EXPECT_EQ(multi.find('\n'), std::string::npos) << "one line: " << multi;
  // A newline in a path folds into a space in YAML: refused, not silently another directory.
  const std::string fold = config_error(ok, {"train.out_dir=/tmp/new\nline"});
  EXPECT_NE(fold.find("a newline in the value of 'train.out_dir'"), std::string::npos) << fold;
  EXPECT_EQ(config_error(ok, {"model={layers: 3,\n  heads: 2}"}), "");  // a map may span lines
}

// Fuzzing findings (tests/cli/fuzz_test.cpp), each a hang or crash before the fix.
TEST(CoreRobustness, FuzzFindingsAreRefusedQuickly) {
  // yaml-cpp 0.7's LoadAll looped forever (allocating) on this mutant of configs/a/pagegram_s15.yaml
  const std::string e = config_error(PG_TEST_DATA "/fuzz/config_yamlcpp_loadall_hang.yaml");
  EXPECT_NE(e.find("config_yamlcpp_loadall_hang.yaml"), std::string::npos) << e;
  TempDir d;
  EXPECT_NE(config_error(write(d, "mid.yaml", "model:\n  layers: 2\n...\ntrain: {}\n")).find("several YAML documents"),
            std::string::npos);
  EXPECT_EQ(config_error(write(d, "lead.yaml", "# comment\n---\nmodel:\n  layers: 2\n")), "");
}

// A YAML alias bomb ("billion laughs": 10 levels of 10 aliases each, 10^10 nodes once expanded) is refused at the
// node limit, not walked; an oversized file and an endless device are refused by size, never read whole.
TEST(CoreRobustness, UnboundedInputsAreRefusedAtOnce) {
  TempDir d;
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    bomb += str("a", i, ": &a", i, " [");
    for (int j = 0; j < 10; ++j) bomb += str(j ? ", " : "", "*a", i - 1);
    bomb += "]\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = config_error(write(d, "bomb.yaml", bomb));
  EXPECT_NE(e.find("more than 100000 YAML nodes once aliases are expanded"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);  // not a hang
  // A few aliases are fine.
  EXPECT_EQ(config_error(write(d, "alias.yaml", "x: &l [0, 4]\nmemory:\n  inject_layers: *l\n")), "");
  // Bounded reads of user files.
  const std::string small = write(d, "p.txt", std::string(100, 'a'));
  EXPECT_EQ(read_file_bounded(small, 100, "--prompt-file").size(), 100u);
  try {
    read_file_bounded(small, 99, "--prompt-file");
    ADD_FAILURE() << "a file over the bound was read";
  } catch (const UserError& ex) {
    EXPECT_NE(std::string(ex.what()).find("--prompt-file " + small + ": larger than 99 bytes"), std::string::npos);
  }
  EXPECT_THROW(read_file_bounded("/dev/zero", 1 << 20, "--prompt-file"), UserError);  // an endless device
  std::filesystem::resize_file(write(d, "huge.yaml", "a: 1\n"), (size_t{16} << 20) + 1);
  EXPECT_NE(config_error(d.path / "huge.yaml").find("larger than 16 MiB"), std::string::npos);
}

TEST(CoreRobustness, SetOfAWholeSectionMergesIntoIt) {
  TempDir d;
  const std::string ok = write(d, "ok.yaml", "model:\n  layers: 2\n  d_model: 64\n");
  YAML::Node n = cfg::load_file(ok, {"model={layers: 3}"});
  EXPECT_EQ(n["model"]["layers"].as<int>(), 3);
  EXPECT_EQ(n["model"]["d_model"].as<int>(), 64);  // kept, not replaced by the section
}

// Runs f in a child process limited to `limit` bytes per file (writes past it fail with EFBIG, as on a full
// disk); returns the child's exit code.
template <class F>
int with_file_size_limit(rlim_t limit, F&& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    ::_exit(f());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(CoreRobustness, AFailedHdf5WriteKeepsThePreviousFileAndLeavesNoTemporary) {
  TempDir d;
  const std::string path = (d.path / "data.h5").string();
  const std::vector<float> small(100, 1.5f), big(1 << 20, 2.5f);
  h5::write_atomic(path, [&](const h5::Group& r) { r.write<float>("x", small); });
  const auto before = fs::file_size(path);
  const int code = with_file_size_limit(256 * 1024, [&] {
    try {
      h5::write_atomic(path, [&](const h5::Group& r) { r.write<float>("x", big); });
    } catch (const ResourceError& e) {
      return std::string(e.what()).find(path) != std::string::npos ? 10 : 11;
    } catch (const std::exception&) {
      return 12;
    }
    return 13;  // no error: the limit did not bite
  });
  EXPECT_EQ(code, 10) << "10 = ResourceError naming the file; 11 = without the path; 12 = other error; 13 = none";
  EXPECT_EQ(fs::file_size(path), before);
  EXPECT_EQ(h5::File::open(path).root().read<float>("x"), small);
  for (const auto& e : fs::directory_iterator(d.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(CoreRobustness, EveryDatasetIsChecksummedAndTypesAreNotConverted) {
  TempDir d;
  const std::string path = (d.path / "t.h5").string();
  h5::write_atomic(path, [&](const h5::Group& r) {
    r.write<float>("small", std::vector<float>{1, 2, 3, 4});
    r.write<int32_t>("ints", std::vector<int32_t>{1, 2, 3});
  });
  EXPECT_THROW(h5::File::open(path).root().read<float>("ints"), IoError);
  // flip a byte of the 16-byte float payload: the small dataset has a checksum too
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const float want[4] = {1, 2, 3, 4};
  const std::string pat(reinterpret_cast<const char*>(want), 16);
  const size_t at = bytes.find(pat);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 5] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_THROW(h5::File::open(path).root().read<float>("small"), IoError);
}

}  // namespace
}  // namespace pg
