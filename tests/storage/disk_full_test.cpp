// A full disk while writing a table file, a token store, a checkpoint or a text file (run config, sweep
// record) is one ResourceError naming the file (exit code 4 from the command line); the
// previous file is kept (or none is left that looks complete) and no temporary stays behind. A full disk is a file
// size limit (RLIMIT_FSIZE) in a child process: writes past it fail with EFBIG, as they would with ENOSPC.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "data/pipeline.h"
#include "tests/test_util.h"
#include "train/config.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

const std::string kBinary = PG_BINARY_DIR "/pagegram";

// Runs `pagegram args...` limited to `limit` bytes per file (the limit is set in the child before exec: forking a
// process that already ran OpenMP and using OpenMP in the child would hang libgomp); returns the exit code and
// stderr.
std::pair<int, std::string> run_limited(rlim_t limit, const std::vector<std::string>& args, const fs::path& dir) {
  const std::string err = (dir / "stderr.txt").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    if (!std::freopen(err.c_str(), "w", stderr)) ::_exit(99);
    std::vector<char*> argv{const_cast<char*>(kBinary.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kBinary.c_str(), argv.data());
    ::_exit(98);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), testing::slurp(err)};
}

// The stderr lines that are errors ("error: ..."); progress lines are not.
int64_t error_lines(const std::string& err) {
  int64_t n = 0;
  for (size_t at = 0; at < err.size();) {
    const size_t e = err.find('\n', at);
    if (err.compare(at, 7, "error: ") == 0) ++n;
    if (e == std::string::npos) break;
    at = e + 1;
  }
  return n;
}

void expect_no_temporaries(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& sets) {
  for (const std::string& s : sets) a.push_back("--set"), a.push_back(s);
  return a;
}

TEST(DiskFull, ATableFileWriteKeepsThePreviousFile) {
  testing::TempDir d;
  const std::vector<std::string> sets =
      with({}, testing::with_sets(testing::tiny_fixture_sets(d.path),
                                  {"memory.layout=pagegram", "memory.target_params=2000000"}));
  for (const std::string format : {"nf4", "mxfp8"}) {
    const std::string path = (d.path / (format + ".pgt")).string();
    std::vector<std::string> args = {"export", "--config", testing::kTinyConfig, "--fill", "random", "--format", format,
                                     "--out",  path};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto [ok, ok_err] = run_limited(RLIM_INFINITY, args, d.path);
    ASSERT_EQ(ok, 0) << ok_err;
    const auto before = fs::file_size(path);
    const std::string first = testing::slurp(path);
    ASSERT_GT(before, 256u * 1024);
    const auto [code, err] = run_limited(128 * 1024, args, d.path);
    EXPECT_EQ(code, 4) << format << ": " << err;  // a resource ran out while writing
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_EQ(error_lines(err), 1) << err;
    EXPECT_EQ(testing::slurp(path), first) << "the previous file is kept whole";
  }
  expect_no_temporaries(d.path);
}

TEST(DiskFull, ATokenStoreWriteLeavesNoStoreThatLooksComplete) {
  testing::TempDir d;
  const std::vector<std::string> args =
      with({"data", "tokenize", "--config", testing::kTinyConfig}, testing::tiny_fixture_sets(d.path));
  const auto [ok, ok_err] = run_limited(RLIM_INFINITY, args, d.path);
  ASSERT_EQ(ok, 0) << ok_err;
  ExperimentConfig c = load_experiment(testing::kTinyConfig, testing::tiny_fixture_sets(d.path));
  const data::DataSet first = data::open_dataset(c.data, c.tokenizer);
  const uint64_t tokens = first.train->n_tokens();
  const std::string store_dir = first.store_dir;
  ASSERT_GT(fs::file_size(fs::path(store_dir) / "train.pgtok"), 64u * 1024);
  fs::remove_all(store_dir);  // the stores go again, the tokenizer stays cached
  const auto [code, err] = run_limited(32 * 1024, args, d.path);
  EXPECT_EQ(code, 4) << err;
  EXPECT_NE(err.find(".pgtok"), std::string::npos) << err;
  EXPECT_EQ(error_lines(err), 1) << err;
  EXPECT_THROW(data::open_dataset(c.data, c.tokenizer), IoError);  // missing, never a truncated store taken
  if (fs::exists(store_dir)) expect_no_temporaries(store_dir);
  const auto [again, again_err] = run_limited(RLIM_INFINITY, args, d.path);  // the next run builds it whole
  ASSERT_EQ(again, 0) << again_err;
  EXPECT_EQ(data::open_dataset(c.data, c.tokenizer).train->n_tokens(), tokens);
}

TEST(DiskFull, ATrainingCheckpointAndLogKeepTheirPreviousVersions) {
  testing::TempDir d;
  const std::string run = (d.path / "run").string();
  const std::vector<std::string> args = with(
      {"train", "--config", testing::kTinyConfig, "--resume", "--stop-after", "2"},
      testing::with_sets(testing::tiny_fixture_sets(d.path), {"memory.layout=pagegram", "memory.target_params=300000",
                                                              "train.eval_interval=0", "train.out_dir=" + run}));
  const auto [tk, tk_err] = run_limited(
      RLIM_INFINITY, with({"data", "tokenize", "--config", testing::kTinyConfig}, testing::tiny_fixture_sets(d.path)),
      d.path);
  ASSERT_EQ(tk, 0) << tk_err;
  const auto [ok, ok_err] = run_limited(RLIM_INFINITY, args, d.path);
  ASSERT_EQ(ok, 0) << ok_err;
  const std::string ckpt = testing::slurp(run + "/checkpoint.h5"), log = testing::slurp(run + "/log.h5");
  ASSERT_GT(ckpt.size(), 256u * 1024);
  // The next two steps, with files limited to 192 KiB: the log may still fit, the checkpoint cannot.
  const auto [code, err] = run_limited(192 * 1024, args, d.path);
  EXPECT_EQ(code, 4) << err;
  EXPECT_NE(err.find("checkpoint.h5"), std::string::npos) << err;
  EXPECT_EQ(error_lines(err), 1) << err;
  EXPECT_EQ(testing::slurp(run + "/checkpoint.h5"), ckpt) << "the previous checkpoint is kept whole";
  expect_no_temporaries(run);
  // The run resumes from that checkpoint as if nothing happened (the log's extra rows are truncated on resume).
  const auto [again, again_err] = run_limited(RLIM_INFINITY, args, d.path);
  EXPECT_EQ(again, 0) << again_err;
}

TEST(DiskFull, ATextFileWriteKeepsThePreviousFile) {
  // config.yaml of a run, sweep records and manifests: all written by write_text_atomic.
  testing::TempDir d;
  const std::string path = (d.path / "record.json").string();
  write_text_atomic(path, "{\"old\": 1}\n");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{1024, 1024};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    try {
      write_text_atomic(path, std::string(8192, 'x'));
    } catch (const ResourceError& e) {
      ::_exit(std::string(e.what()).find(path) != std::string::npos ? 10 : 11);
    } catch (...) {
      ::_exit(12);
    }
    ::_exit(13);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 10) << "10 = ResourceError naming the file";
  EXPECT_EQ(testing::slurp(path), "{\"old\": 1}\n");
  expect_no_temporaries(d.path);
}

}  // namespace
}  // namespace pg
