// Seed/variant sweeps (issue 6): a sweep file expands to named runs with resolved configs, each in a directory
// keyed by a hash of its config; a local runner, a Slurm job-array writer, a status table and a collect step.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "train/config.h"

namespace pg {

// One `key=value` override of a config key (value as YAML text), with where it came from in the sweep file.
struct SweepOverride {
  std::string key, value;  // e.g. "memory.layout", "pagegram"
  std::string origin;      // sweep-file key path, e.g. "variants.flat"
  std::string assignment() const { return key + "=" + value; }
};

struct SweepVariant {
  std::string name;
  std::vector<SweepOverride> overrides;
};

struct SweepGridAxis {
  std::string key;                  // config key, e.g. "memory.lr_mult"
  std::string label;                // its name in run names: the last key component (the full key if ambiguous)
  std::vector<std::string> values;  // YAML texts, in file order
};

// The scalar fields of a sweep file; `set`, `variants` and `grid` are maps of config keys, parsed by hand.
struct SweepFields {
  std::string name;
  std::string base;     // experiment config, relative to the sweep file (or absolute)
  std::string out_dir;  // default runs/<name>, relative to the working directory
  std::vector<int64_t> seeds;
  int64_t tokens = 0;    // train.tokens for every run (0 = the base config's); variants and grid may override it
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
  std::vector<SweepOverride> set;     // applied to every run
  std::vector<SweepVariant> variants;  // at least one (an implicit "base" when the file has none)
  std::vector<SweepGridAxis> grid;     // cartesian product, combined with every variant

  const std::string& name() const { return f.name; }
  std::string base_path() const;  // base resolved against the sweep file's directory
  std::string out_dir() const;    // f.out_dir or runs/<name>
};

// Parses and checks a sweep file: unknown keys, bad values, unknown config keys in set/variants/grid and the
// keys the runner owns (train.seed, train.out_dir, train.threads) are ConfigErrors naming the sweep-file key path.
SweepSpec load_sweep(const std::string& path);

struct SweepRun {
  std::string name;     // <variant>[-<label>=<value>...]-s<seed>
  std::string variant;  // variant name
  int64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> grid;  // (config key, value) of this run's grid point
  std::vector<std::string> overrides;                     // tokens, set, variant, grid, train.seed: in order
  ExperimentConfig config;  // resolved; train.out_dir = dir (absolute), train.threads = 0
  std::string hash;         // config_hash(config)
  std::string dir;          // <out_dir>/<name>-<hash>, absolute
};

// First 8 hex digits of XXH64 of the resolved config's dump with train.out_dir and train.threads blanked: the
// two keys that never change results (the trainer's resume check ignores exactly these).
std::string config_hash(const ExperimentConfig& cfg);

// Every run of the sweep, seed-major (all variants of the first seed, then the next seed) so that an
// interrupted sweep already holds complete paired comparisons. Each config is resolved with load_experiment.
std::vector<SweepRun> expand_sweep(const SweepSpec& spec);

enum class RunState { kPending, kPartial, kRunning, kFinished, kDiverged, kFailed };
const char* run_state_name(RunState s);

struct RunStatus {
  RunState state = RunState::kPending;
  int64_t step = 0;             // last logged optimizer step
  int64_t total_steps = 0;      // of the resolved config
  int64_t checkpoint_step = -1; // step of checkpoint.h5 (-1: none)
  double final_loss = -1.0;     // last held-out loss in the log (-1: none)
  double elapsed_s = 0.0;       // training wall time in the log
  std::string note;             // failure reason (from <dir>/failed.txt)
};
// Reads <dir>/log.h5 (atomically replaced by the trainer, so safe to read while it runs), checkpoint.h5's step,
// failed.txt and the runner's lock (a run locked by a live runner is kRunning).
RunStatus run_status(const SweepRun& run);
// True when <dir>/log.h5 exists and says status=finished.
bool run_dir_finished(const std::string& dir);

// Writes <dir>/config.yaml (the resolved config, train.out_dir = dir) atomically.
void write_run_config(const SweepRun& run);
// Writes <out_dir>/sweep.json: name, spec, base, seeds, variants, grid and every run (name, variant, seed,
// grid point, dir relative to the manifest, hash, overrides). The report reads it.
void write_sweep_manifest(const SweepSpec& spec, const std::vector<SweepRun>& runs);

// Builds (or finds cached) the token stores of every distinct data + tokenizer section of the runs, in this
// process (`pagegram sweep prepare`); one line per distinct section. The corpus itself must exist.
std::vector<std::string> prepare_sweep_data(const std::vector<SweepRun>& runs);

struct SweepRunOptions {
  int64_t parallel = 0;      // 0: the sweep file's
  int64_t cores = 0;         // 0: CPUs this process may use
  bool dry_run = false;      // print the plan, write and run nothing
  std::string binary;        // pagegram executable for the child runs; empty: /proc/self/exe
  std::vector<std::string> only;  // shell patterns (fnmatch) on run names: run only the matching ones; empty: all
  bool progress = true;      // progress on stderr
  double poll_seconds = 1.0;
};
struct SweepRunResult {
  int64_t total = 0, already_finished = 0, launched = 0, finished = 0;
  int64_t not_selected = 0;               // unfinished runs left out by `only`
  std::vector<std::string> failed;        // names of runs that exited non-zero (or ended unfinished)
  std::vector<std::string> diverged;      // runs whose log says diverged: a result, skipped (not retried)
  std::vector<std::string> locked;        // runs another runner holds
  bool interrupted = false;
};
// Runs every unfinished run (finished and diverged runs are skipped: divergence is deterministic) as `pagegram train --config <dir>/config.yaml --resume --set train.threads=N`
// children (N = cores / parallel), at most `parallel` at a time; output to <dir>/train.out. Children die with
// the runner (PR_SET_PDEATHSIG) and resume from their checkpoints next time. A failed run is reported with the
// tail of its train.out and the sweep goes on. SIGINT/SIGTERM stop the children and return interrupted.
SweepRunResult run_sweep(const SweepSpec& spec, const SweepRunOptions& opt);

// The status table (one line per run: state, steps, checkpoint, final held-out loss, training time).
std::string sweep_status_table(const SweepSpec& spec, const std::vector<SweepRun>& runs);

struct SlurmOptions {
  std::string script;          // output file of the job script
  std::string partition;       // empty: the cluster's default
  std::string time = "24:00:00";
  int64_t cpus = 2;            // --cpus-per-task = train.threads
  std::string binary;          // pagegram on the cluster; empty: this executable
  std::string mem;             // --mem (empty: not set)
};
// The Slurm job-array script text (one task per line of runs_txt).
std::string slurm_script(const SweepSpec& spec, size_t n_runs, const std::string& runs_txt,
                         const SlurmOptions& opt);
// Writes every run's config.yaml, <out_dir>/runs.txt (absolute run dirs, one per line), the manifest and the script.
void write_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SlurmOptions& opt);

// ---- compact run records (committed to the repo; a sweep resumes from them on any machine) ----
// <directory of the sweep file>/records/<name>-<hash>.json: the run's identity (sweep, name, variant, seed,
// grid point, config hash, full resolved config), provenance (revision, kernels, cpu, host, compiler flags,
// threads), status, the held-out curve, the training loss of every logged step, the last value of every
// logged scalar, throughput and wall time. Format: experiments/RECORDS.md.
std::string record_path(const SweepSpec& spec, const SweepRun& run);
bool record_exists(const SweepSpec& spec, const SweepRun& run);
// The record of a finished (or diverged) run directory, as JSON text; IoError when the log is missing or unfinished.
std::string run_record_json(const SweepSpec& spec, const SweepRun& run);
// Writes the record atomically; returns its path.
std::string write_run_record(const SweepSpec& spec, const SweepRun& run);

struct CollectResult {
  std::vector<std::string> merged;     // "<name>: from <dir>"
  std::vector<std::string> had;        // already finished here
  std::vector<std::string> missing;    // finished nowhere
  std::vector<std::string> refused;    // "<dir>: why" (same name but another config, unfinished, ...)
};
// For each run not finished locally, copies a finished directory named <name>-<hash> from one of `from` (or
// from a sweep out_dir below it) whose log's config hashes to the same value; never one with another hash.
CollectResult collect_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                            const std::vector<std::string>& from);

}  // namespace pg
