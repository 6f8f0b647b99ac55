// A sweep file and its expansion: named runs with resolved configs, each in a directory keyed by a hash
// of its config, and the JSON manifest that lists them (experiments/RECORDS.md, report.py reads it).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "train/config.h"

namespace pg {

// One `key=value` override of a config key (value as YAML text), with where it came from in the sweep file.
struct SweepOverride {
  std::string key, value;  // e.g. "memory.layout", "pagegram"
  std::string origin;  // sweep-file key path, e.g. "variants.flat"
  std::string assignment() const { return key + "=" + value; }
};

struct SweepVariant {
  std::string name;
  std::vector<SweepOverride> overrides;
};

struct SweepGridAxis {
  std::string key;  // config key, e.g. "memory.lr_mult"
  std::string label;  // its name in run names: the last key component (the full key if ambiguous)
  std::vector<std::string> values;  // YAML texts, in file order
};

// The scalar fields of a sweep file; `set`, `variants` and `grid` are maps of config keys, parsed by hand.
struct SweepFields {
  std::string name;
  std::string base;  // experiment config, relative to the sweep file (or absolute)
  std::string out_dir;  // default runs/<name>, relative to the working directory
  std::vector<int64_t> seeds;
  int64_t tokens = 0;  // train.tokens for every run (0 = the base config's); variants and grid may override it
  int64_t parallel = 1;  // runs at a time on one machine
  std::string description;

  template <class V>
  void visit(V& v) {
    v("name", name, "sweep name ([A-Za-z0-9_.-]); run directories go to out_dir");
    v("base", base, "experiment config every run starts from (relative to the sweep file)");
    v("out_dir", out_dir, "where run directories go (default runs/<name>, relative to the working directory)");
    v("seeds", seeds, "train.seed values; every variant runs with every seed", cfg::Range{0, 9.0e15});
    v("tokens", tokens, "token budget (train.tokens) of every run; 0 keeps the base config's", cfg::Range{0, 1e13});
    v("parallel", parallel, "runs at a time (threads per run = cores / parallel)", cfg::Range{1, 1024});
    v("description", description, "free text, copied into the manifest");
  }
};

struct SweepSpec {
  std::string path;  // the sweep file
  SweepFields f;
  std::vector<SweepOverride> set;  // applied to every run
  std::vector<SweepVariant> variants;  // at least one (an implicit "base" when the file has none)
  std::vector<SweepGridAxis> grid;  // cartesian product, combined with every variant
  // `variant_seeds: {none: [0, 1]}`: a variant that runs on only some of `seeds` (each listed seed must be in
  // `seeds`); variants not named run on every seed.
  std::map<std::string, std::vector<int64_t>> variant_seeds;

  const std::string& name() const { return f.name; }
  std::string base_path() const;  // base resolved against the sweep file's directory
  std::string out_dir() const;  // f.out_dir or runs/<name>
};

// Parses and checks a sweep file: unknown keys, bad values, unknown config keys in set/variants/grid and the
// keys the runner owns (train.seed, train.out_dir, train.threads) are ConfigErrors naming the sweep-file key path.
SweepSpec load_sweep(const std::string& path);

struct SweepRun {
  std::string name;  // <variant>[-<label>=<value>...]-s<seed>
  std::string variant;  // variant name
  int64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> grid;  // (config key, value) of this run's grid point
  std::vector<std::string> overrides;  // tokens, set, variant, grid, train.seed: in order
  ExperimentConfig config;  // resolved; train.out_dir = dir (absolute), train.threads = 0
  std::string hash;  // config_hash(config)
  std::string dir;  // <out_dir>/<name>-<hash>, absolute
};

// The resolved config as YAML, leaving out keys added after runs were recorded while they hold their default
// value (today train.precision: fp32): what a run directory's config.yaml holds, so that the build that recorded
// earlier runs of a sweep (`sweep run --pagegram OLD`) can run it, and what config_hash reads.
YAML::Node portable_yaml(const ExperimentConfig& cfg);
// First 8 hex digits of XXH64 of the resolved config's dump with train.out_dir and train.threads blanked: the
// two keys that never change results (the trainer's resume check ignores exactly these).
std::string config_hash(const ExperimentConfig& cfg);

// Every run of the sweep, seed-major (all variants of the first seed, then the next seed) so that an
// interrupted sweep already holds complete paired comparisons. Each config is resolved with load_experiment.
std::vector<SweepRun> expand_sweep(const SweepSpec& spec);

// `"seeds": [...],\n  "variants": [...],\n  "grid": {...}` of a sweep (the manifest's and the expansion file's).
std::string sweep_axes_json(const SweepSpec& spec);

// Writes <out_dir>/sweep.json: name, spec, base, seeds, variants, grid and every run (name, variant, seed,
// grid point, dir relative to the manifest, hash, overrides). The report reads it.
void write_sweep_manifest(const SweepSpec& spec, const std::vector<SweepRun>& runs);

}  // namespace pg
