// The local sweep runner: every unfinished run as a `pagegram train` child process, `parallel` at a time, each
// pinned to its slice of the CPUs. It prints nothing: it reports a plan and events (start, done, diverged,
// failed, progress, summary) to a callback, and the command line (cli/sweep_cmd.cpp) prints them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace pg {

struct SweepRunOptions {
  int64_t parallel = 0;  // 0: the sweep file's
  int64_t cores = 0;  // 0: CPUs this process may use
  std::string binary;  // pagegram executable for the child runs; empty: /proc/self/exe
  std::vector<std::string> only;  // shell patterns (fnmatch) on run names: run only the matching ones; empty: all
  bool commit = false;  // git-commit each record as its run finishes (commit_record)
  bool allow_mixed_data = false;  // run even when the sweep's finished runs trained on another corpus build
  double poll_seconds = 1.0;
  double progress_seconds = 60.0;  // a kProgress event at most this often (0: after every poll, for a terminal)
};

// One step of the runner, for the caller to show. `text` is the finished line (no trailing newline).
struct SweepEvent {
  enum Kind {
    kHeader,  // the plan's header line, before anything runs
    kSkipped,  // a diverged run not retried, or a run another runner holds
    kStart,  // a child was started
    kDone,  // a run finished (its record written)
    kDiverged,  // a run diverged (a result, recorded; not retried)
    kFailed,  // a run exited non-zero or unfinished (failed.txt written; the sweep goes on)
    kProgress,  // done/total, the running runs' steps and an ETA
    kInterrupted,  // SIGINT/SIGTERM stopped the running children
    kSummary,  // the last event: finished / failed / diverged counts
  };
  Kind kind;
  std::string run;  // the run's name (events about one run)
  std::string text;
};
using SweepEventFn = std::function<void(const SweepEvent&)>;

// What `sweep run` would do, run by run (the dry run shows it; run_sweep works from it).
struct SweepPlanRow {
  std::string name, hash;
  std::string action;  // "skip (finished)", "resume at step 12/40", "run 40 steps", ...
  std::string sets;  // the run's overrides as ` --set k=v` arguments (quoted where a shell needs it)
};
struct SweepPlan {
  std::string header;  // "sweep NAME: N runs, F finished, Q to run, P at a time x T threads, in DIR"
  std::vector<SweepPlanRow> rows;
  std::string footer;  // base config, binary, threads per run (and the corpus-build check's finding, if any)
};

struct SweepRunResult {
  int64_t total = 0, already_finished = 0, launched = 0, finished = 0;
  int64_t not_selected = 0;  // unfinished runs left out by `only`
  std::vector<std::string> failed;  // names of runs that exited non-zero (or ended unfinished)
  std::vector<std::string> diverged;  // runs whose log says diverged: a result, skipped (not retried)
  std::vector<std::string> locked;  // runs another runner holds
  bool interrupted = false;
};

// The plan of `sweep run` (writes nothing). UserError when `only` matches no run.
SweepPlan plan_sweep(const SweepSpec& spec, const SweepRunOptions& opt);

// Runs every unfinished run (finished and diverged runs are skipped: divergence is deterministic) as `pagegram train
// --config <dir>/config.yaml --resume --set train.threads=N` children (N = cores / parallel), at most `parallel` at
// a time; output to <dir>/train.out. A finished or diverged run that has no record gets one. Children die with the
// runner (PR_SET_PDEATHSIG) and resume from their checkpoints next time. A failed run is reported with the tail of
// its train.out and the sweep goes on. SIGINT/SIGTERM stop the children and return interrupted.
// Before anything runs: UserError when runs are to be added to finished runs whose log or record names another corpus
// build than the one prepared here (data::dataset_fingerprint; the runs of a sweep compare on one), unless
// allow_mixed_data. Runs whose records predate the field are not checked (the header says how many).
SweepRunResult run_sweep(const SweepSpec& spec, const SweepRunOptions& opt, const SweepEventFn& on_event = {});

// The runs of a sweep compare on one corpus build (experiments/RECORDS.md, "Corpus builds"). Checks the done runs
// (finished or diverged, here or recorded: done[i]) that share a data section with a run of `to_run` against the
// token stores prepared here (data::dataset_fingerprint; sections not prepared here are not checked). `mismatch`: one
// line naming the runs of another corpus build and both fingerprints, with a hint ("" when none); `note`: the done
// runs that name no corpus build (records before the field; "" when none). Used by `sweep run` and `sweep slurm`.
struct CorpusBuildCheck {
  std::string mismatch, note;
};
CorpusBuildCheck check_corpus_build(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                    const std::vector<bool>& done, const std::vector<size_t>& to_run);

// Builds (or finds cached) the token stores of every distinct data + tokenizer section of the runs, in this
// process (`pagegram sweep prepare`); one line per distinct section. The corpus itself must exist.
std::vector<std::string> prepare_sweep_data(const std::vector<SweepRun>& runs);

// Commits one file in the git work tree that holds it: `git add` then `git commit --only` of that path alone (what
// else is staged stays staged and out of the commit), retried while another git process holds the index lock.
// Returns "committed <short sha>" or throws IoError with git's last output line (not a git work tree, no identity...).
std::string commit_record(const std::string& path, const std::string& message);

// The sweep ETA's seconds per token, from the seconds per token of each run this runner finished and of the sweep's
// runs finished before it: the median of this runner's once it has 3 (the machine may differ from earlier ones),
// else the median of all of them; -1 when there are none (the caller then uses the running runs). A median, so one
// run slowed by other work on the machine does not swing the estimate.
double sweep_seconds_per_token(std::vector<double> this_runner, const std::vector<double>& before);

// This process's executable (/proc/self/exe): the default pagegram binary of child runs and Slurm scripts.
std::string self_executable();

}  // namespace pg
