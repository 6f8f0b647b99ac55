// A run killed (SIGKILL) at random instants and resumed until it finishes leaves the same checkpoint and
// the same log as an uninterrupted run (timings aside), bit for bit; a second process on the same run directory
// is refused while the first holds it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/h5.h"
#include "data/pipeline.h"
#include "train/config.h"
#include "tests/test_util.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

const std::string kBinary = PG_BINARY_DIR "/pagegram";

std::vector<std::string> args_for(const fs::path& dir, const std::string& out) {
  return {kBinary,
          "train",
          "--config",
          PG_SOURCE_DIR "/configs/tiny.yaml",
          "--resume",
          "--set",
          "data.cache_dir=" + (dir / "cache").string(),
          "--set",
          "data.corpus=" PG_TEST_DATA "/corpus",
          "--set",
          "tokenizer.vocab_size=1024",
          "--set",
          "model.vocab=1024",
          "--set",
          "tokenizer.input_sentence_size=4000",
          "--set",
          "data.val_tokens=2048",
          "--set",
          "train.steps=12",
          "--set",
          "train.eval_interval=4",
          "--set",
          "train.eval_windows=8",
          "--set",
          "train.checkpoint_interval=3",
          "--set",
          "memory.layout=pagegram",
          "--set",
          "memory.inject_layers=[0,1]",
          "--set",
          "memory.target_params=200000",
          "--set",
          "train.threads=1",
          "--set",
          "train.out_dir=" + out};
}

// Builds the tokenizer and token stores of the fixture corpus in dir/cache (the train command expects them).
void prepare(const fs::path& dir) {
  ExperimentConfig c = load_experiment(testing::kTinyConfig, testing::tiny_fixture_sets(dir));
  data::tokenize(c.data, c.tokenizer);
}

pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string null = "/dev/null";
    freopen(null.c_str(), "w", stdout);
    freopen(null.c_str(), "w", stderr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}
int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Every dataset of a group tree as bytes (skipping the wall-clock series of the training log).
void collect(const h5::Group& g, const std::string& prefix, std::map<std::string, std::vector<double>>& out) {
  for (const auto& name : g.children()) {
    const std::string path = prefix + "/" + name;
    // wall-clock series, and reading (b) of Foreign, whose running owner counts are not checkpointed: a resumed
    // run restarts them (train/FORMATS.md, run log); every other series must be identical
    if (path == "/train/elapsed_s" || path == "/train/tok_per_s" || path == "/collisions/foreign_owner") continue;
    bool is_group = false;
    try {
      g.dataset_shape(name);
    } catch (const IoError&) {
      is_group = true;
    }
    if (is_group || H5Oexists_by_name(g.id(), name.c_str(), H5P_DEFAULT) <= 0) {
      collect(g.sub(name), path, out);
      continue;
    }
    hid_t ds = H5Dopen2(g.id(), name.c_str(), H5P_DEFAULT);
    if (ds < 0) {
      collect(g.sub(name), path, out);
      continue;
    }
    const hid_t t = H5Dget_type(ds);
    const bool fl = H5Tget_class(t) == H5T_FLOAT, f4 = H5Tget_size(t) == 4;
    const bool u64 = H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE && H5Tget_size(t) == 8;
    const bool i32 = H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 4;
    H5Tclose(t);
    H5Dclose(ds);
    std::vector<double> v;
    if (fl && f4) {
      for (float x : g.read<float>(name)) v.push_back(x);
    } else if (fl) {
      v = g.read<double>(name);
    } else if (u64) {
      for (uint64_t x : g.read<uint64_t>(name)) v.push_back(static_cast<double>(x));
    } else if (i32) {
      for (int32_t x : g.read<int32_t>(name)) v.push_back(x);
    } else {
      for (int64_t x : g.read<int64_t>(name)) v.push_back(static_cast<double>(x));
    }
    out[path] = v;
  }
}
std::map<std::string, std::vector<double>> contents(const std::string& file) {
  std::map<std::string, std::vector<double>> out;
  h5::File f = h5::File::open(file);
  collect(f.root(), "", out);
  return out;
}

TEST(KillResume, RandomKillsThenResumeGiveTheUninterruptedLogAndCheckpoint) {
  ASSERT_TRUE(fs::exists(kBinary)) << kBinary << " is not built";
  const fs::path dir = fs::temp_directory_path() / ("pg_kill_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  prepare(dir);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(wait_exit(spawn(args_for(dir, (dir / "ref").string()))), 0);
  const int ref_us = static_cast<int>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  const auto ref_log = contents((dir / "ref" / "log.h5").string());
  const auto ref_ckpt = contents((dir / "ref" / "checkpoint.h5").string());
  ASSERT_GT(ref_log.size(), 5u);
  std::mt19937 rng(12345);
  int kills = 0, resumes = 0;
  const int trials = 10;
  for (int trial = 0; trial < trials; ++trial) {
    const std::string out = (dir / ("t" + std::to_string(trial))).string();
    // Round 0 is killed as soon as its first checkpoint (step 3 of 12) appears, so every trial is interrupted
    // mid-run whatever the machine's speed; later rounds at random instants anywhere in the run (start-up, steps,
    // evaluation, checkpoint and log writes).
    for (int round = 0; round < 20; ++round) {
      const pid_t pid = spawn(args_for(dir, out));
      ++resumes;
      if (round == 0) {
        for (int i = 0; i < 20000 && !fs::exists(out + "/checkpoint.h5"); ++i)
          std::this_thread::sleep_for(std::chrono::microseconds(500));
      } else {
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(ref_us / 10, ref_us * 4 / 5)(rng)));
      }
      const bool killed = ::kill(pid, SIGKILL) == 0;
      const int code = wait_exit(pid);
      if (code == 0) break;  // it finished before the kill
      ASSERT_EQ(code, 128 + SIGKILL) << "trial " << trial << " round " << round << ": exit " << code;
      kills += killed;
    }
    ASSERT_EQ(wait_exit(spawn(args_for(dir, out))), 0) << "final resume of trial " << trial;
    auto differing = [](const std::map<std::string, std::vector<double>>& a,
                        const std::map<std::string, std::vector<double>>& b) {
      std::string d;
      for (const auto& [k, v] : b) {
        auto it = a.find(k);
        if (it == a.end() || it->second != v) d += " " + k;
      }
      for (const auto& [k, v] : a)
        if (!b.count(k)) d += " +" + k;
      return d;
    };
    EXPECT_EQ(differing(contents(out + "/checkpoint.h5"), ref_ckpt), "") << "trial " << trial;
    EXPECT_EQ(differing(contents(out + "/log.h5"), ref_log), "") << "trial " << trial;
    EXPECT_EQ(h5::File::open(out + "/log.h5").root().attr_string("status"), "finished");
    for (const auto& e : fs::directory_iterator(out))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  std::printf(
      "[kill-resume] %d trials, %d processes started, %d killed (uninterrupted run %.2f s), every run "
      "equal to the uninterrupted one\n",
      trials, resumes, kills, ref_us / 1e6);
  EXPECT_GE(kills, trials);  // every trial was killed at least once mid-run
  fs::remove_all(dir);
}

TEST(KillResume, ASecondProcessOnTheSameRunDirectoryIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("pg_lock_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto args = args_for(dir, (dir / "run").string());
  args.push_back("--set");
  args.push_back("train.steps=400");
  prepare(dir);
  const pid_t first = spawn(args);
  // wait until the first holds the lock (its lock file names it)
  for (int i = 0; i < 200 && !fs::exists(dir / "run" / ".train.lock"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string cmd = "'" + kBinary + "' train --config " PG_SOURCE_DIR "/configs/tiny.yaml --set train.out_dir=" +
                          (dir / "run").string() + " --set data.cache_dir=" + (dir / "cache").string() +
                          " --set data.corpus=" PG_TEST_DATA
                          "/corpus --set tokenizer.vocab_size=1024 --set model.vocab=1024"
                          " --set tokenizer.input_sentence_size=4000 --set data.val_tokens=2048 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string text(4096, '\0');
  text.resize(fread(text.data(), 1, text.size(), p));
  const int code = ::pclose(p);
  ::kill(first, SIGKILL);
  wait_exit(first);
  EXPECT_EQ(WEXITSTATUS(code), 2) << text;
  EXPECT_NE(text.find("is in use by another training process (pid " + std::to_string(first)), std::string::npos)
      << text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pg
