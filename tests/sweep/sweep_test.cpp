// Sweeps: expansion (names, overrides, seeds, config hashes), bad sweep files named by key path, the Slurm
// script's content, collect merging only matching hashes, and run -> rerun skipping finished runs (tiny model), the
// corpus-build check of new runs against the sweep's records.
#include "sweep/collect.h"
#include "sweep/records.h"
#include "sweep/runner.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "sweep/status.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/h5.h"
#include "data/pipeline.h"
#include "tests/test_util.h"
#include "train/run_log.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

using pg::testing::slurp;
using pg::testing::write_text;
fs::path temp_dir(const std::string& tag) { return pg::testing::make_temp_dir("sweep_" + tag); }
const std::string& kTiny = pg::testing::kTinyConfig;

class SweepSpecTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("spec"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string sweep_file(const std::string& body) {
    return write_text(dir_ / "sweep.yaml", "base: " + kTiny + "\nout_dir: " + (dir_ / "runs").string() + "\n" + body);
  }
  // The ConfigError message of loading and expanding a sweep file ("" when it loads).
  std::string error_of(const std::string& body) {
    try {
      expand_sweep(load_sweep(sweep_file(body)));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(SweepSpecTest, ExpandsVariantsGridAndSeedsIntoNamedRuns) {
  SweepSpec spec = load_sweep(sweep_file(R"(
name: t
seeds: [0, 1]
tokens: 4096
set: {train.eval_interval: 2}
variants:
  none: {}
  flat: {memory: {layout: flat, target_params: 20000, inject_layers: [0, 1]}}
grid:
  memory.lr_mult: [10, 70]
)"));
  std::vector<SweepRun> runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 8u);
  const std::vector<std::string> names = {"none-lr_mult=10-s0", "none-lr_mult=70-s0", "flat-lr_mult=10-s0",
                                          "flat-lr_mult=70-s0", "none-lr_mult=10-s1", "none-lr_mult=70-s1",
                                          "flat-lr_mult=10-s1", "flat-lr_mult=70-s1"};
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].name, names[i]);
  EXPECT_EQ(runs[2].overrides,
            (std::vector<std::string>{"train.tokens=4096", "train.eval_interval=2", "memory.layout=flat",
                                      "memory.target_params=20000", "memory.inject_layers=[0, 1]", "memory.lr_mult=10",
                                      "train.seed=0"}));
  EXPECT_EQ(runs[2].variant, "flat");
  EXPECT_EQ(runs[2].grid, (std::vector<std::pair<std::string, std::string>>{{"memory.lr_mult", "10"}}));
  for (const auto& r : runs) {
    EXPECT_EQ(r.config.train.seed, r.seed);
    EXPECT_EQ(r.config.train.tokens, 4096);
    EXPECT_EQ(r.config.train.eval_interval, 2);
    EXPECT_EQ(r.config.train.threads, 0);
    EXPECT_EQ(r.dir, (dir_ / "runs" / (r.name + "-" + r.hash)).string());
    EXPECT_EQ(r.config.train.out_dir, r.dir);
    EXPECT_EQ(r.hash.size(), 8u);
  }
  EXPECT_EQ(runs[6].seed, 1);
  EXPECT_EQ(runs[2].config.memory.layout, "flat");
  EXPECT_EQ(runs[2].config.memory.lr_mult, 10.0);
  EXPECT_EQ(runs[3].config.memory.lr_mult, 70.0);
  EXPECT_EQ(runs[2].config.memory.inject_layers, (std::vector<int64_t>{0, 1}));

  // Hashes: stable across expansions, distinct for distinct configs, blind to threads and out_dir.
  std::vector<SweepRun> again = expand_sweep(load_sweep(spec.path));
  std::set<std::string> hashes;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].hash, again[i].hash);
    hashes.insert(runs[i].hash);
  }
  EXPECT_EQ(hashes.size(), runs.size());
  ExperimentConfig c = runs[0].config;
  c.train.threads = 2;
  c.train.out_dir = "/elsewhere";
  EXPECT_EQ(config_hash(c), runs[0].hash);
  c.train.lr *= 1.5;
  EXPECT_NE(config_hash(c), runs[0].hash);
  // The default out_dir and the implicit variant.
  SweepSpec plain = load_sweep(write_text(dir_ / "plain.yaml", "name: p\nbase: " + kTiny + "\nseeds: [3]\n"));
  EXPECT_EQ(plain.out_dir(), "runs/p");
  std::vector<SweepRun> pr = expand_sweep(plain);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].name, "base-s3");
  EXPECT_EQ(pr[0].dir, (fs::absolute("runs/p") / ("base-s3-" + pr[0].hash)).lexically_normal().string());
}

// The expansion file (records/expansion.json, what experiments/report.py reads instead of expanding the sweep file
// itself): every run of the expansion with its name, hash, overrides and resolved config (the keys that never change
// results blanked), and the texts of the sweep file and of every preset of its base chain.
TEST_F(SweepSpecTest, TheExpansionFileListsEveryRunWithItsHashConfigAndInputs) {
  const std::string file = sweep_file(R"(
name: t
description: "expansion test"
seeds: [0, 1]
variants:
  none: {}
  flat: {memory: {layout: flat, target_params: 20000, inject_layers: [0, 1]}}
grid:
  memory.lr_mult: [10, 70]
)");
  const SweepSpec spec = load_sweep(file);
  const std::vector<SweepRun> runs = expand_sweep(spec);
  const std::string path = write_sweep_expansion(spec, runs);
  EXPECT_EQ(path, (dir_ / "records" / "expansion.json").string());
  EXPECT_EQ(expansion_path(spec), path);
  const YAML::Node plan = YAML::LoadFile(path);  // JSON is YAML
  EXPECT_EQ(plan["format"].as<std::string>(), "pagegram-sweep-expansion");
  EXPECT_EQ(plan["format_version"].as<int>(), 1);
  EXPECT_EQ(plan["name"].as<std::string>(), "t");
  EXPECT_EQ(plan["spec"].as<std::string>(), "sweep.yaml");
  EXPECT_EQ(plan["out_dir"].as<std::string>(), (dir_ / "runs").string());
  EXPECT_EQ(plan["grid"]["memory.lr_mult"].size(), 2u);
  ASSERT_EQ(plan["runs"].size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const YAML::Node r = plan["runs"][i];
    EXPECT_EQ(r["name"].as<std::string>(), runs[i].name);
    EXPECT_EQ(r["hash"].as<std::string>(), runs[i].hash);
    EXPECT_EQ(r["seed"].as<int64_t>(), runs[i].seed);
    EXPECT_EQ(r["overrides"].size(), runs[i].overrides.size());
    // the config is the run's: loaded back, it has the run's hash (out_dir and threads blanked)
    const std::string text = r["config"].as<std::string>();
    EXPECT_NE(text.find("out_dir: \"\""), std::string::npos) << text;
    EXPECT_NE(text.find("threads: 0"), std::string::npos) << text;
    const ExperimentConfig back =
        load_experiment(write_text(dir_ / "back.yaml", text), {"train.out_dir=" + (dir_ / "x").string()});
    EXPECT_EQ(config_hash(back), runs[i].hash) << runs[i].name;
  }
  // inputs: the sweep file, tiny.yaml and the base.yaml it builds on, each with its text, relative to the sweep file
  const YAML::Node in = plan["inputs"];
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in["sweep.yaml"].as<std::string>(), slurp(file));
  const std::string tiny = fs::path(kTiny).lexically_normal().lexically_relative(dir_).string();
  EXPECT_EQ(in[tiny].as<std::string>(), slurp(kTiny));
  const fs::path base = fs::path(kTiny).parent_path() / "base.yaml";
  EXPECT_EQ(in[base.lexically_normal().lexically_relative(dir_).string()].as<std::string>(), slurp(base.string()));
}

TEST_F(SweepSpecTest, VariantSeedsRunAVariantOnASubsetOfTheSeeds) {
  SweepSpec spec =
      load_sweep(sweep_file("name: vs\nseeds: [0, 1, 2]\nvariants: {none: {}, flat: {memory.layout: flat}}\n"
                            "variant_seeds: {none: [1, 0]}\n"));
  std::vector<std::string> names;
  for (const auto& r : expand_sweep(spec)) names.push_back(r.name);
  // Seed by seed, as without variant_seeds; none only on its own seeds (in the order of `seeds`).
  EXPECT_EQ(names, (std::vector<std::string>{"none-s0", "flat-s0", "none-s1", "flat-s1", "flat-s2"}));
  // The runs it keeps are the runs the full sweep would have had (same hashes).
  SweepSpec full =
      load_sweep(write_text(dir_ / "full.yaml", "name: vs\nbase: " + kTiny + "\nout_dir: " + (dir_ / "runs").string() +
                                                    "\nseeds: [0, 1, 2]\nvariants: {none: {}, flat: "
                                                    "{memory.layout: flat}}\n"));
  std::map<std::string, std::string> full_hash;
  for (const auto& r : expand_sweep(full)) full_hash[r.name] = r.hash;
  for (const auto& r : expand_sweep(spec)) EXPECT_EQ(r.hash, full_hash.at(r.name)) << r.name;
}

TEST_F(SweepSpecTest, BadSweepFilesNameTheKeyPath) {
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "'" << msg << "' lacks '" << part << "'";
  };
  EXPECT_TRUE(has(error_of("nmae: x\nseeds: [0]\n"), "unknown key 'nmae' (did you mean 'name'?)"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nvariants: {flat: {memory.layot: flat}}\n"),
                  "key 'variants.flat.memory.layot': not a config key (did you mean 'memory.layout'?)"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nset: {train: {bogus: 1}}\n"), "key 'set.train.bogus'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [a]\n"), "key 'seeds[0]': expected an integer"));
  EXPECT_TRUE(has(error_of("name: x\n"), "key 'seeds': missing"));
  EXPECT_TRUE(has(error_of("name: x y\nseeds: [0]\n"), "key 'name'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 0]\n"), "key 'seeds': a seed is listed twice"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nparallel: 0\n"), "'parallel'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nset: {train.seed: 3}\n"), "key 'set.train.seed': the sweep owns"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nset: {train.out_dir: a}\n"), "key 'set.train.out_dir'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\ngrid: {memory.slots: 4}\n"),
                  "key 'grid.memory.slots': expected a non-empty list"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nvariants: {a-b: {}}\n"), "key 'variants.a-b'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\nvariants: [a, b]\n"), "key 'variants'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: {b: [0]}\n"),
                  "key 'variant_seeds.b': no such variant"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: {a: [2]}\n"),
                  "key 'variant_seeds.a': seed 2 is not in 'seeds'"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: {a: []}\n"),
                  "key 'variant_seeds.a': expected a non-empty list"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: {a: [0, 0]}\n"),
                  "key 'variant_seeds.a': seed 0 is listed twice"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: {a: [x]}\n"),
                  "key 'variant_seeds.a': 'x' is not a seed"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0, 1]\nvariants: {a: {}}\nvariant_seeds: [a]\n"), "key 'variant_seeds'"));
  // Bounded: a grid of a million runs is refused before any run is built; an alias bomb at the node limit.
  {
    std::string g = "name: x\nseeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\ngrid:\n";
    for (const char* k : {"train.lr", "train.weight_decay", "train.grad_clip", "train.beta1", "train.beta2"})
      g += str("  ", k, ": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]\n");
    EXPECT_TRUE(has(error_of(g), "the sweep expands to 1e+06 runs (10 seeds x 1 variants x 10 (grid train.lr)"));
  }
  std::string bomb = "name: x\nseeds: [0]\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    bomb += str("a", i, ": &a", i, " [");
    for (int j = 0; j < 10; ++j) bomb += str(j ? ", " : "", "*a", i - 1);
    bomb += "]\n";
  }
  EXPECT_TRUE(has(error_of(bomb), "YAML nodes once aliases are expanded"));
  // Values are checked by the config machinery when the run resolves; the message names run, key and origin.
  const std::string bad = error_of("name: x\nseeds: [0]\nvariants: {v: {memory.layout: pagegam}}\n");
  EXPECT_TRUE(has(bad, "run 'v-s0'"));
  EXPECT_TRUE(has(bad, "memory.layout"));
  EXPECT_TRUE(has(bad, "variants.v"));
  EXPECT_TRUE(has(error_of("name: x\nseeds: [0]\ntokens: 1000\nset: {train.steps: 3}\n"), "key 'tokens'"));
  EXPECT_THROW(load_sweep(write_text(dir_ / "nobase.yaml", "name: x\nbase: missing.yaml\nseeds: [0]\n")), IoError);
  EXPECT_THROW(load_sweep((dir_ / "absent.yaml").string()), IoError);
}

TEST_F(SweepSpecTest, SlurmScriptHasOneArrayTaskPerRun) {
  SweepSpec spec =
      load_sweep(sweep_file("name: cl\nseeds: [0, 1]\nvariants: {none: {}, flat: {memory.layout: flat, "
                            "memory.target_params: 20000, memory.inject_layers: [0]}}\n"));
  std::vector<SweepRun> runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 4u);
  SlurmOptions opt;
  opt.script = (dir_ / "job.sh").string();
  opt.partition = "cpu";
  opt.time = "01:30:00";
  opt.cpus = 4;
  opt.binary = "/opt/pg/bin/pagegram";
  write_slurm(spec, runs, opt);
  const std::string s = slurp(opt.script);
  const std::string runs_txt = (dir_ / "runs" / "runs.txt").string();
  for (const std::string& part : {std::string("#!/bin/bash\n"), std::string("#SBATCH --array=0-3\n"),
                                  std::string("#SBATCH --cpus-per-task=4\n"), std::string("#SBATCH --partition=cpu\n"),
                                  std::string("#SBATCH --time=01:30:00\n"), std::string("#SBATCH --job-name=pg-cl\n"),
                                  "#SBATCH --output=" + (dir_ / "runs").string() + "/slurm-%A_%a.out\n",
                                  std::string("PAGEGRAM=/opt/pg/bin/pagegram\n"),
                                  "RUN=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " + runs_txt + ")\n",
                                  std::string("if \"$PAGEGRAM\" sweep finished \"$RUN\"; then"),
                                  std::string("\"$PAGEGRAM\" train --config \"$RUN/config.yaml\" --resume --set "
                                              "train.threads=$SLURM_CPUS_PER_TASK >> \"$RUN/train.out\" 2>&1\n")})
    EXPECT_NE(s.find(part), std::string::npos) << "missing: " << part << "\nin:\n" << s;
  EXPECT_TRUE((fs::status(opt.script).permissions() & fs::perms::owner_exec) != fs::perms::none);
  // runs.txt: one absolute run directory per line, in expansion order; each holds its resolved config.
  std::stringstream lines(slurp(runs_txt));
  size_t i = 0;
  for (std::string l; std::getline(lines, l); ++i) {
    ASSERT_LT(i, runs.size());
    EXPECT_EQ(l, runs[i].dir);
    EXPECT_TRUE(fs::path(l).is_absolute());
    ExperimentConfig c = parse_experiment(slurp(fs::path(l) / "config.yaml"), l);
    EXPECT_EQ(c.train.out_dir, runs[i].dir);
    EXPECT_EQ(config_hash(c), runs[i].hash);
  }
  EXPECT_EQ(i, runs.size());
  // Without a partition there is no partition line.
  opt.partition.clear();
  EXPECT_EQ(slurm_script(spec, 4, runs_txt, opt).find("--partition"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "runs" / "sweep.json"));
}

// A finished run directory as another machine would leave it (only log.h5 matters to collect).
void fake_finished_run(const fs::path& dir, ExperimentConfig cfg, const std::string& status = "finished") {
  fs::create_directories(dir);
  cfg.train.out_dir = "/cluster/scratch/" + dir.filename().string();
  cfg.train.threads = 8;
  RunLog log((dir / "log.h5").string(), RunMeta{cfg::dump(cfg), "test", 8, false, "0"});
  log.train_row(1, 1024, 6.0, 1e-3, 1.0, 1000.0, 0.5);
  log.eval_row(1, 1024, 5.5);
  log.set_status(status);
  log.flush();
  std::ofstream(dir / "checkpoint.h5") << "not really a checkpoint";
}

TEST_F(SweepSpecTest, SweepFinishedAnswersWithItsExitCode) {
  const std::string bin = PG_BINARY_DIR "/pagegram";
  ASSERT_TRUE(fs::exists(bin));
  SweepSpec spec = load_sweep(sweep_file("name: fin\nseeds: [0]\n"));
  const std::vector<SweepRun> runs = expand_sweep(spec);
  fake_finished_run(dir_ / "done", runs[0].config);
  fake_finished_run(dir_ / "half", runs[0].config, "running");
  auto code = [&](const std::string& arg) {
    const int rc = std::system((bin + " sweep finished " + arg + " > /dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(code((dir_ / "done").string()), 0);
  EXPECT_EQ(code((dir_ / "half").string()), 1);  // docs/sweeps.md: 1 = not finished (the Slurm script's test)
  EXPECT_EQ(code((dir_ / "absent").string()), 1);
  EXPECT_EQ(code(""), 2);  // a bad command line stays 2
}

TEST_F(SweepSpecTest, CollectMergesOnlyFinishedRunsWithTheSameHash) {
  SweepSpec spec = load_sweep(sweep_file("name: co\nseeds: [0, 1, 2]\n"));
  std::vector<SweepRun> runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 3u);
  const fs::path remote = dir_ / "remote";
  auto leaf = [](const SweepRun& r) { return fs::path(r.dir).filename(); };
  fake_finished_run(remote / leaf(runs[0]), runs[0].config);  // matches: merged
  ExperimentConfig other = runs[1].config;
  other.train.lr *= 2;  // right name and hash in the directory name, another config inside: refused
  fake_finished_run(remote / leaf(runs[1]), other);
  fake_finished_run(remote / (runs[1].name + "-deadbeef"), runs[1].config);  // another hash: never looked at
  fake_finished_run(remote / leaf(runs[2]), runs[2].config, "running");  // unfinished: refused
  CollectResult r = collect_sweep(spec, runs, {remote.string()});
  ASSERT_EQ(r.merged.size(), 1u);
  EXPECT_EQ(r.merged[0].rfind(runs[0].name + ": from ", 0), 0u);
  EXPECT_EQ(r.refused.size(), 2u);
  EXPECT_EQ(r.missing, (std::vector<std::string>{runs[1].name, runs[2].name}));
  EXPECT_TRUE(run_dir_finished(runs[0].dir));
  EXPECT_TRUE(fs::exists(fs::path(runs[0].dir) / "checkpoint.h5"));
  EXPECT_EQ(parse_experiment(slurp(fs::path(runs[0].dir) / "config.yaml"), "c").train.out_dir, runs[0].dir);
  EXPECT_FALSE(fs::exists(runs[1].dir));
  EXPECT_EQ(run_status(runs[0]).state, RunState::kFinished);
  EXPECT_EQ(run_status(runs[1]).state, RunState::kPending);
  // Again: the merged run is already here and nothing is copied twice.
  CollectResult again = collect_sweep(spec, runs, {remote.string()});
  EXPECT_TRUE(again.merged.empty());
  EXPECT_EQ(again.had, (std::vector<std::string>{runs[0].name}));
}

// Runs the tiny model on the fixture corpus through the pagegram binary: 2 seeds x (a good and a broken variant),
// one run pre-interrupted after 1 of 2 steps, one already diverged. A rerun launches only the failed one.
TEST(SweepRunner, RunsResumesReportsFailuresAndSkipsFinishedRuns) {
  const std::string binary = PG_BINARY_DIR "/pagegram";
  if (!fs::exists(binary)) GTEST_SKIP() << binary << " is not built (cmake --build build --target pagegram)";
  const fs::path dir = temp_dir("run");
  const std::string cache = (dir / "cache").string();
  const std::string common =
      "data.cache_dir: " + cache +
      "\n  data.corpus: " PG_TEST_DATA
      "/corpus\n"
      "  tokenizer.vocab_size: 1024\n  model.vocab: 1024\n  tokenizer.input_sentence_size: 4000\n"
      "  data.val_tokens: 2048\n  train.steps: 2\n  train.eval_interval: 0\n"
      "  train.eval_windows: 8\n  train.checkpoint_interval: 0\n";
  SweepSpec spec = load_sweep(
      write_text(dir / "sweep.yaml", "name: smoke\nbase: " + kTiny + "\nout_dir: " + (dir / "runs").string() +
                                         "\nseeds: [0, 1]\nparallel: 2\n"
                                         "set:\n  " +
                                         common + "variants:\n  none: {}\n  broken: {tokenizer.seed: 7}\n"));
  std::vector<SweepRun> runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 4u);
  data::tokenize(runs[0].config.data, runs[0].config.tokenizer);

  // Interrupt none-s0 after one step (a checkpoint at step 1, log status running).
  write_run_config(runs[0]);
  const std::string cmd =
      binary + " train --config " + runs[0].dir + "/config.yaml --stop-after 1 > " + runs[0].dir + "/train.out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(runs[0].dir + "/train.out");
  RunStatus partial = run_status(runs[0]);
  EXPECT_EQ(partial.state, RunState::kPartial);
  EXPECT_EQ(partial.checkpoint_step, 1);
  EXPECT_EQ(partial.step, 1);

  // broken-s1 already diverged (a fake log): a result, skipped rather than retried.
  {
    fs::create_directories(runs[3].dir);
    RunLog log(runs[3].dir + "/log.h5", RunMeta{cfg::dump(runs[3].config), "test", 1, false, "0"});
    log.train_row(1, 1024, NAN, 1e-3, NAN, 1000.0, 0.5);
    log.set_status("diverged");
    log.flush();
  }
  EXPECT_EQ(run_status(runs[3]).state, RunState::kDiverged);

  SweepRunOptions opt;
  opt.binary = binary;
  opt.cores = 2;
  opt.poll_seconds = 0.05;
  {  // the plan (dry run) writes nothing and says what run_sweep will do
    const SweepPlan plan = plan_sweep(spec, opt);
    ASSERT_EQ(plan.rows.size(), 4u);
    EXPECT_NE(plan.header.find("4 runs, 0 finished, 3 to run"), std::string::npos) << plan.header;
    EXPECT_NE(plan.rows[3].action.find("skip (diverged"), std::string::npos) << plan.rows[3].action;
    EXPECT_NE(plan.rows[0].sets.find(" --set train.seed=0"), std::string::npos) << plan.rows[0].sets;
  }
  std::vector<SweepEvent> events;
  opt.progress_seconds = 0;  // a progress event after every poll
  SweepRunResult r = run_sweep(spec, opt, [&](const SweepEvent& e) { events.push_back(e); });
  // The runner reports, the caller prints: header first, summary last, one start per launch, done/failed by run.
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().kind, SweepEvent::kHeader);
  EXPECT_EQ(events.back().kind, SweepEvent::kSummary);
  auto count = [&](SweepEvent::Kind k) {
    return std::count_if(events.begin(), events.end(), [k](const SweepEvent& e) { return e.kind == k; });
  };
  EXPECT_EQ(count(SweepEvent::kStart), 3);
  EXPECT_EQ(count(SweepEvent::kDone), 2);
  EXPECT_EQ(slurp(expansion_path(spec)), sweep_expansion_json(spec, runs));  // beside the records it wrote
  EXPECT_EQ(count(SweepEvent::kFailed), 1);
  EXPECT_EQ(count(SweepEvent::kSkipped), 1);  // the diverged run
  EXPECT_GE(count(SweepEvent::kProgress), 1);
  for (const SweepEvent& e : events)
    if (e.kind == SweepEvent::kFailed) {
      EXPECT_EQ(e.run, "broken-s0");
    }
  EXPECT_EQ(r.total, 4);
  EXPECT_EQ(r.already_finished, 0);
  EXPECT_EQ(r.launched, 3);
  EXPECT_EQ(r.finished, 2);
  EXPECT_EQ(r.failed, (std::vector<std::string>{"broken-s0"}));
  EXPECT_EQ(r.diverged, (std::vector<std::string>{"broken-s1"}));
  EXPECT_FALSE(r.interrupted);
  for (int i : {0, 2}) {
    EXPECT_TRUE(run_dir_finished(runs[i].dir)) << slurp(runs[i].dir + "/train.out");
    RunStatus s = run_status(runs[i]);
    EXPECT_EQ(s.state, RunState::kFinished);
    EXPECT_EQ(s.step, 2);
    EXPECT_GT(s.final_loss, 0.0);
    EXPECT_EQ(
        parse_experiment(h5::File::open(runs[i].dir + "/log.h5").root().attr_string("config"), "log").train.threads,
        1);  // cores / parallel
  }
  // The resumed run logged steps 1 and 2 once each.
  EXPECT_EQ(h5::File::open(runs[0].dir + "/log.h5").root().sub("train").read<int64_t>("step"),
            (std::vector<int64_t>{1, 2}));
  {
    RunStatus s = run_status(runs[1]);
    EXPECT_EQ(s.state, RunState::kFailed);
    EXPECT_NE(s.note.find("exit code 2"), std::string::npos) << s.note;
    EXPECT_NE(slurp(runs[1].dir + "/train.out").find("tokenizer"), std::string::npos);
  }
  // Records: one per finished or diverged run, next to the sweep file; a recorded run is not rerun even when
  // its directory is gone (a new machine with only the repository).
  for (int i : {0, 2, 3}) ASSERT_TRUE(record_exists(spec, runs[i])) << record_path(spec, runs[i]);
  EXPECT_FALSE(record_exists(spec, runs[1]));
  {
    const std::string rec = slurp(record_path(spec, runs[2]));
    EXPECT_NE(rec.find("\"format\": \"pagegram-run-record\""), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"name\": \"none-s1\""), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"config_hash\": \"" + runs[2].hash + "\""), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"status\": \"finished\""), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"kernels\": \""), std::string::npos) << rec;
    EXPECT_NE(rec.find("\"data\": \"train "), std::string::npos) << "the corpus build's fingerprint: " << rec;
    char want[64];
    std::snprintf(want, sizeof want, "\"heldout_loss\": %.17g", run_status(runs[2]).final_loss);
    EXPECT_NE(rec.find(want), std::string::npos) << want << " in " << rec;
    EXPECT_LT(rec.size(), 20000u);
    EXPECT_NE(rec.find("\"collisions\": null"), std::string::npos) << "the smoke runs have no table: " << rec;
    EXPECT_NE(slurp(record_path(spec, runs[3])).find("\"status\": \"diverged\""), std::string::npos);
  }
  const std::string table = sweep_status_table(spec, runs);
  EXPECT_NE(table.find("1 diverged, 1 failed, 2 finished"), std::string::npos) << table;
  const std::string manifest = slurp(dir / "runs" / "sweep.json");
  EXPECT_NE(manifest.find("\"name\": \"none-s1\""), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"dir\": \"none-s1-" + runs[2].hash + "\""), std::string::npos) << manifest;

  // --only: a pattern that selects nothing is refused; one that leaves the failed run out launches nothing.
  {
    SweepRunOptions sel = opt;
    sel.only = {"no-such-run*"};
    EXPECT_THROW(run_sweep(spec, sel), UserError);
    sel.only = {"none-*"};
    SweepRunResult r2 = run_sweep(spec, sel);
    EXPECT_EQ(r2.already_finished, 2);
    EXPECT_EQ(r2.not_selected, 1);
    EXPECT_EQ(r2.launched, 0);
    EXPECT_TRUE(r2.failed.empty());
  }

  // Rerun: the finished runs are skipped, the failed ones retried (and fail again).
  SweepRunResult again = run_sweep(spec, opt);
  EXPECT_EQ(again.already_finished, 2);
  EXPECT_EQ(again.launched, 1);
  EXPECT_EQ(again.finished, 0);
  EXPECT_EQ(again.failed, (std::vector<std::string>{"broken-s0"}));
  EXPECT_EQ(again.diverged, (std::vector<std::string>{"broken-s1"}));

  // A new machine: run directories gone, records kept. Only the unrecorded (failed) run is launched.
  const double loss2 = run_status(runs[2]).final_loss;
  fs::remove_all(runs[0].dir);
  fs::remove_all(runs[2].dir);
  {  // the status table reads the committed records of runs it has no directory for
    const RunStatus s = recorded_status(spec, runs[2]);
    EXPECT_EQ(s.state, RunState::kFinished);
    EXPECT_EQ(s.step, 2);
    EXPECT_EQ(s.final_loss, loss2);
    const std::string t = sweep_status_table(spec, runs);
    EXPECT_NE(t.find("1 diverged, 1 failed, 2 finished"), std::string::npos) << t;
    EXPECT_NE(t.find("committed record"), std::string::npos) << t;
    // A record counts only when it is whole and this run's: each damage is one line naming the record.
    const std::string path = record_path(spec, runs[2]), good = testing::slurp(path);
    auto damaged = [&](const std::string& from, const std::string& to) {
      std::string t2 = good;
      const size_t at = t2.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) t2.replace(at, from.size(), to);
      testing::write_text(path, t2);
      try {
        recorded_status(spec, runs[2]);
      } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find(path + ": run record"), std::string::npos) << e.what();
        return std::string(e.what());
      }
      return std::string("accepted");
    };
    EXPECT_NE(damaged(good.substr(good.size() / 2), "").find("unreadable"), std::string::npos);  // truncated
    EXPECT_NE(damaged("\"status\": \"finished\"", "\"status\": \"running\"").find("status 'running'"),
              std::string::npos);
    EXPECT_NE(damaged("\"name\": \"" + runs[2].name, "\"name\": \"other").find("is of run"), std::string::npos);
    EXPECT_NE(damaged("\"format\": \"pagegram-run-record\"", "\"format\": \"x\"").find("format is 'x'"),
              std::string::npos);
    {  // the config edited (its hash no longer the run's): the first "  lr: <value>" of the config changed
      const size_t at = good.find("\\n  lr: ");
      ASSERT_NE(at, std::string::npos);
      const size_t end = good.find("\\n", at + 2);
      EXPECT_NE(damaged(good.substr(at, end - at), "\\n  lr: 0.123").find("(edited?)"), std::string::npos);
    }
    testing::write_text(path, good);
  }
  SweepRunResult fresh = run_sweep(spec, opt);
  EXPECT_EQ(fresh.already_finished, 2);
  EXPECT_EQ(fresh.launched, 1);
  EXPECT_FALSE(fs::exists(runs[0].dir + "/log.h5"));

  // Corpus builds: the records name the data prepared here (the header-only fingerprint is the trainer's), so the
  // runs above were not refused. A record from another corpus build refuses new runs that share its data, unless
  // allowed; a record without the field is named in a note.
  const std::string here = data::dataset_fingerprint(runs[0].config.data, runs[0].config.tokenizer);
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(run_data_fingerprint(spec, runs[0]), here);
  EXPECT_EQ(run_data_fingerprint(spec, runs[1]), "");  // no record, no finished log
  const std::string rec0 = record_path(spec, runs[0]);
  const std::string text0 = slurp(rec0);
  auto with_data = [&](const std::string& replacement) {  // rec0 with its "data": "..." field replaced
    const std::string key = ", \"data\": \"" + here + "\"";
    const size_t at = text0.find(key);
    EXPECT_NE(at, std::string::npos) << text0;
    std::string t = text0;
    if (at != std::string::npos) t.replace(at, key.size(), replacement);
    write_text(rec0, t);
  };
  with_data(", \"data\": \"train 1 tokens 1 docs; \\\"another\\\" build\"");
  EXPECT_EQ(run_data_fingerprint(spec, runs[0]), "train 1 tokens 1 docs; \"another\" build");
  fs::remove(record_path(spec, runs[2]));  // none-s1 is to run again, on the data of none-s0
  SweepRunOptions none_only = opt;
  none_only.only = {"none-*"};
  {
    const SweepPlan plan = plan_sweep(spec, none_only);
    EXPECT_NE(plan.footer.find("would refuse: sweep smoke: 1 finished run (none-s0) trained on another corpus build"),
              std::string::npos)
        << plan.footer;
  }
  try {
    run_sweep(spec, none_only);
    ADD_FAILURE() << "a run on another corpus build than its sweep's records was not refused";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(none-s0) trained on another corpus build"), std::string::npos) << m;
    EXPECT_NE(m.find("theirs: 'train 1 tokens 1 docs"), std::string::npos) << m;
    EXPECT_NE(m.find("here: '" + here + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("--allow-mixed-data"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(runs[2].dir + "/log.h5")) << "nothing runs when refused";
  {  // `sweep slurm` refuses the same way, before it writes anything
    SlurmOptions so;
    so.script = (dir / "job.sh").string();
    so.missing = true;
    try {
      write_slurm(spec, runs, so);
      ADD_FAILURE() << "a Slurm array on another corpus build than its sweep's records was not refused";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("(none-s0) trained on another corpus build"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(so.script));
    so.allow_mixed_data = true;
    const SlurmPlan sp = write_slurm(spec, runs, so);
    EXPECT_TRUE(sp.script_written);
    EXPECT_NE(sp.data_note.find("warning (--allow-mixed-data): sweep smoke: 1 finished run (none-s0)"),
              std::string::npos)
        << sp.data_note;
    fs::remove(so.script);
  }
  {
    SweepRunOptions allow = none_only;
    allow.allow_mixed_data = true;
    std::string header;
    SweepRunResult mixed = run_sweep(spec, allow, [&](const SweepEvent& e) {
      if (e.kind == SweepEvent::kHeader) header = e.text;
    });
    EXPECT_EQ(mixed.launched, 1);
    EXPECT_EQ(mixed.finished, 1);
    EXPECT_NE(header.find("warning (--allow-mixed-data): sweep smoke: 1 finished run (none-s0)"), std::string::npos)
        << header;
  }
  // A record from before the field: not checked, and the plan says so.
  fs::remove(record_path(spec, runs[2]));
  fs::remove_all(runs[2].dir);
  with_data("");
  EXPECT_EQ(run_data_fingerprint(spec, runs[0]), "");
  {
    const SweepPlan plan = plan_sweep(spec, none_only);
    EXPECT_NE(plan.header.find("note: 1 finished run (none-s0) names no corpus build"), std::string::npos)
        << plan.header;
    EXPECT_EQ(plan.footer.find("would refuse"), std::string::npos) << plan.footer;
  }
  fs::remove_all(dir);
}

// The ETA's seconds per token: a median, so one run slowed by other work does not swing it; this runner's own runs
// once it has 3 (the machine may differ from the earlier runs'), all finished runs before that; none: -1.
TEST(SweepRunner, EtaRateIsAMedianThatOneSlowRunDoesNotSwing) {
  EXPECT_EQ(sweep_seconds_per_token({}, {}), -1.0);
  EXPECT_DOUBLE_EQ(sweep_seconds_per_token({}, {2.0}), 2.0);
  // one run of this launch slowed 9x beside two earlier runs: the median stays at the typical run
  EXPECT_DOUBLE_EQ(sweep_seconds_per_token({9.0}, {1.0, 1.1}), 1.1);
  EXPECT_DOUBLE_EQ(sweep_seconds_per_token({9.0, 1.2}, {1.0, 1.1}), 1.15);
  // three runs of this launch (a faster machine): the earlier runs no longer count
  EXPECT_DOUBLE_EQ(sweep_seconds_per_token({0.5, 0.6, 4.0}, {1.0, 1.1, 1.2, 1.3}), 0.6);
}

// `sweep run --commit`: a record is committed alone (what else is staged stays staged and out of the commit); outside
// a git work tree the error says which file and what to do.
TEST(SweepRunner, CommitRecordCommitsThatFileAlone) {
  const fs::path dir = temp_dir("git");
  auto sh = [&](const std::string& cmd) {
    const std::string full = "cd '" + dir.string() + "' && " + cmd + " > git.out 2>&1";
    const int rc = std::system(full.c_str());
    std::string out = slurp(dir / "git.out");
    fs::remove(dir / "git.out");
    EXPECT_EQ(rc, 0) << cmd << ": " << out;
    return out;
  };
  sh("git init -q . && git config user.name t && git config user.email t@t && git commit -q --allow-empty -m init");
  fs::create_directories(dir / "records");
  write_text(dir / "records" / "a-s0-1234abcd.json", "{}\n");
  write_text(dir / "notes.txt", "staged, not part of the record's commit\n");
  sh("git add notes.txt");
  const std::string r = commit_record((dir / "records" / "a-s0-1234abcd.json").string(), "smoke: record of a-s0");
  EXPECT_EQ(r.rfind("committed ", 0), 0u) << r;
  EXPECT_EQ(sh("git show --name-only --format=%s HEAD"), "smoke: record of a-s0\n\nrecords/a-s0-1234abcd.json\n");
  EXPECT_EQ(sh("git diff --cached --name-only"), "notes.txt\n");
  EXPECT_EQ(sh("git rev-list --count HEAD"), "2\n");

  const fs::path outside = temp_dir("nogit");
  write_text(outside / "b.json", "{}\n");
  try {
    commit_record((outside / "b.json").string(), "m");
    ADD_FAILURE() << "no error outside a git work tree";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("git commit of " + (outside / "b.json").string()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("hint:"), std::string::npos) << e.what();
  }
  fs::remove_all(outside);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pg
