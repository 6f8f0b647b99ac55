// "A command never replaces a file it did not make" (core/output.h, train/run_dir.h): every command with an output
// is pointed at each kind of existing project file; it must refuse with one line (exit 2) and leave the file's
// bytes as they were. Its own kind of output is replaced; --force replaces any file. Also the run directory of
// `train`: a file, a dangling symlink, another config's run, and a resume that cannot resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/output.h"
#include "core/text.h"
#include "data/pipeline.h"
#include "sweep/spec.h"
#include "tests/test_util.h"
#include "train/trainer.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class OutputPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::make_temp_dir("outputs");
    sets_ = testing::with_sets(testing::tiny_fixture_sets(dir_),
                               {"train.steps=2", "train.eval_interval=0", "train.eval_windows=8",
                                "memory.layout=pagegram", "memory.target_params=200000", "memory.inject_layers=[0,1]"});
    cfg_ =
        load_experiment(testing::kTinyConfig, testing::with_sets(sets_, {"train.out_dir=" + (dir_ / "run").string()}));
    data::tokenize(cfg_.data, cfg_.tokenizer);
    data::DataSet ds = data::open_dataset(cfg_.data, cfg_.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    train(cfg_, ds, opt);
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "cache"))
      if (e.path().filename() == "heldout.pgtok") store_ = e.path().string();
    // One file of every kind a project command writes, each a copy so a replaced file would show.
    kinds_ = {{"checkpoint", copy("run/checkpoint.h5", "k.checkpoint.h5")},
              {"run log", copy("run/log.h5", "k.log.h5")},
              {"token store", copy(store_, "k.pgtok")},
              {"config", copy("run/config.yaml", "k.config.yaml")}};
    write_text_atomic((dir_ / "k.record.json").string(),
                      "{\n  \"format\": \"pagegram-run-record\",\n  \"format_version\": 1\n}\n");
    kinds_.push_back({"run record", (dir_ / "k.record.json").string()});
    write_text_atomic((dir_ / "k.notes.txt").string(), "my notes\n");
    kinds_.push_back({"text", (dir_ / "k.notes.txt").string()});
    ASSERT_EQ(run("export --checkpoint " + (dir_ / "run/checkpoint.h5").string() + " --out " + p("k.table.pgt")).first,
              0);
    kinds_.push_back({"table file", p("k.table.pgt")});
    ASSERT_EQ(run(stream_cmd("collisions --tokens 500") + " --out " + p("k.coll.h5")).first, 0);
    kinds_.push_back({"collisions output", p("k.coll.h5")});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string p(const std::string& name) { return (dir_ / name).string(); }
  static std::string copy(const std::string& from, const std::string& to) {
    const fs::path src = fs::path(from).is_absolute() ? fs::path(from) : dir_ / from;
    fs::copy_file(src, dir_ / to, fs::copy_options::overwrite_existing);
    return (dir_ / to).string();
  }
  static std::string stream_cmd(const std::string& cmd) {
    std::string s = cmd + " --config " + testing::kTinyConfig;
    for (const auto& x : sets_) s += " --set '" + x + "'";
    return s;
  }
  // (exit code, output) of `pagegram <args>`.
  static std::pair<int, std::string> run(const std::string& args) {
    const std::string out = p(str("cmd.", ::getpid(), ".out"));
    const int rc = std::system((binary() + " " + args + " > " + out + " 2>&1").c_str());
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, testing::slurp(out)};
  }
  static std::string binary() { return PG_BINARY_DIR "/pagegram"; }
  // A one-run sweep of the fixture config (for `sweep slurm`).
  static std::string sweep_file() {
    std::string text =
        "name: outs\nbase: " + testing::kTinyConfig + "\nout_dir: " + p("sweep_runs") + "\nseeds: [0]\nset:\n";
    for (const auto& x : sets_) {
      const size_t eq = x.find('=');
      text += "  " + x.substr(0, eq) + ": " + x.substr(eq + 1) + "\n";
    }
    return testing::write_text(dir_ / "sweep.yaml", text);
  }

  static inline fs::path dir_;
  static inline std::vector<std::string> sets_;
  static inline ExperimentConfig cfg_;
  static inline std::string store_;
  static inline std::vector<std::pair<std::string, std::string>> kinds_;  // (what, path)
};

TEST_F(OutputPaths, FileKindsAreRecognized) {
  EXPECT_EQ(file_kind(p("k.checkpoint.h5")), "pagegram-checkpoint");
  EXPECT_EQ(file_kind(p("k.log.h5")), "pagegram-runlog");
  EXPECT_EQ(file_kind(p("k.pgtok")), "pagegram-token-store");
  EXPECT_EQ(file_kind(p("k.table.pgt")), "pagegram-table");
  EXPECT_EQ(file_kind(p("k.coll.h5")), "pagegram-collisions");
  EXPECT_EQ(file_kind(p("k.record.json")), "pagegram-run-record");
  EXPECT_EQ(file_kind(p("k.notes.txt")), "file");
  EXPECT_EQ(file_kind(dir_.string()), "directory");
  EXPECT_EQ(file_kind(p("absent")), "");
}

TEST_F(OutputPaths, NoCommandReplacesAFileItDidNotMake) {
  const std::string ckpt = (dir_ / "run/checkpoint.h5").string();
  // (command prefix before --out, the kind it writes itself)
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"export --checkpoint " + ckpt, "table file"},
      {stream_cmd("collisions --tokens 500"), "collisions output"},
      {stream_cmd("addresses --tokens 500"), ""},
      {stream_cmd("flashsim --tokens 500 --sizes 1e6 --caches 0"), ""},
      {stream_cmd("iobench --tokens 100 --size 1e5 --depths 1 --dir " + p("iob")), ""},
      {"sweep slurm " + sweep_file(), ""},
  };
  int refused = 0;
  for (const auto& [cmd, own] : commands)
    for (const auto& [what, path] : kinds_) {
      if (what == own) continue;
      const std::string before = testing::slurp(path);
      const auto [rc, out] = run(cmd + " --out " + path);
      EXPECT_EQ(rc, 2) << cmd << " over a " << what << ": " << out;
      EXPECT_NE(out.find("refusing to replace an existing file"), std::string::npos) << cmd << ": " << out;
      EXPECT_NE(out.find("--force"), std::string::npos) << out;
      EXPECT_EQ(testing::slurp(path), before) << cmd << " changed the " << what;
      ++refused;
    }
  EXPECT_EQ(refused, 6 * 8 - 2);
  // sweep slurm replaces its own job script
  const std::string script = p("job.sh");
  ASSERT_EQ(run("sweep slurm " + sweep_file() + " --out " + script).first, 0);
  EXPECT_EQ(file_kind(script), "pagegram-slurm-script");
  EXPECT_EQ(run("sweep slurm " + sweep_file() + " --out " + script).first, 0);
  // A directory and a missing folder: one line each, nothing written.
  EXPECT_EQ(run("export --checkpoint " + ckpt + " --out " + dir_.string()).first, 2);
  EXPECT_EQ(run("export --checkpoint " + ckpt + " --out " + p("no/such/folder.pgt")).first, 2);
  // Its own kind is replaced, and --force replaces any file.
  EXPECT_EQ(run("export --checkpoint " + ckpt + " --out " + p("k.table.pgt")).first, 0);
  const std::string victim = copy("k.notes.txt", "k.forced.txt");
  const auto [rc, out] = run("export --checkpoint " + ckpt + " --out " + victim + " --force");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(file_kind(victim), "pagegram-table");
}

TEST_F(OutputPaths, TrainRefusesARunDirectoryItMustNotWrite) {
  const std::string train = stream_cmd("train");
  const std::string before = testing::slurp((dir_ / "run/checkpoint.h5").string());
  // another config's run, with and without --resume
  for (const char* extra : {"", " --resume"}) {
    const auto [rc, out] =
        run(train + " --set train.out_dir=" + (dir_ / "run").string() + " --set train.seed=7" + extra);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("holds a run of another config"), std::string::npos) << out;
  }
  EXPECT_EQ(testing::slurp((dir_ / "run/checkpoint.h5").string()), before);
  // a file, a dangling symlink
  auto [rc, out] = run(train + " --set train.out_dir=" + p("k.notes.txt"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("exists and is not a directory"), std::string::npos) << out;
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  std::tie(rc, out) = run(train + " --set train.out_dir=" + p("dangling"));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("a symlink to a missing target"), std::string::npos) << out;
  // a directory that cannot be made (root may write anywhere else: /proc refuses even root)
  std::tie(rc, out) = run(train + " --set train.out_dir=/proc/pagegram_run");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cannot create the run directory"), std::string::npos) << out;
  // spaces and non-ASCII letters are a path like any other
  std::tie(rc, out) = run(train + " --set 'train.out_dir=" + p("with space/ünï cødé") + "'");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(file_kind(p("with space/ünï cødé/checkpoint.h5")), "pagegram-checkpoint");
  // checkpoint.h5 or log.h5 that is another kind of project file: refused, bytes unchanged (the property test's
  // rule for train's own two outputs)
  int refused = 0;
  for (const auto& [name, own, says] :
       {std::tuple{"checkpoint.h5", "checkpoint", "is not a checkpoint of this program"},
        {"log.h5", "run log", "is not a run log of this program"}})
    for (const auto& [what, path] : kinds_) {
      if (what == own) continue;
      const std::string sub = str("odd", refused);
      fs::create_directories(dir_ / sub);
      const std::string victim = copy(path, sub + "/" + name);
      const std::string bytes = testing::slurp(victim);
      std::tie(rc, out) = run(train + " --set train.out_dir=" + p(sub));
      EXPECT_EQ(rc, 2) << name << " holding a " << what << ": " << out;
      EXPECT_NE(out.find(says), std::string::npos) << out;
      EXPECT_EQ(out.find("file file"), std::string::npos) << out;
      EXPECT_EQ(testing::slurp(victim), bytes) << "train changed the " << what << " in " << name;
      ++refused;
    }
  EXPECT_EQ(refused, 2 * (8 - 1));
  // a resume that cannot resume (log of trained steps, no checkpoint) refuses; --force starts over
  fs::create_directories(dir_ / "nockpt");
  copy("run/log.h5", "nockpt/log.h5");
  copy("run/config.yaml", "nockpt/config.yaml");
  const std::string log_before = testing::slurp(p("nockpt/log.h5"));
  std::tie(rc, out) = run(train + " --set train.out_dir=" + p("nockpt") + " --resume");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("the run cannot resume"), std::string::npos) << out;
  EXPECT_EQ(testing::slurp(p("nockpt/log.h5")), log_before);
  std::tie(rc, out) = run(train + " --set train.out_dir=" + p("nockpt") + " --resume --force");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(fs::exists(dir_ / "nockpt" / "checkpoint.h5"));
}

}  // namespace
}  // namespace pg
