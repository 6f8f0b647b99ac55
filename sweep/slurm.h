// Slurm job arrays of a sweep: every run's config.yaml, <out_dir>/runs.txt and a job script (one array task per
// run; a task skips a finished run and resumes an interrupted one). With `missing` the array covers only the runs
// that are not finished, so failed, cancelled or timed-out tasks are resubmitted alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace pg {

struct SlurmOptions {
  std::string script;  // output file of the job script
  std::string partition;  // empty: the cluster's default
  std::string time = "24:00:00";
  int64_t cpus = 2;  // --cpus-per-task = train.threads
  std::string binary;  // pagegram on the cluster; empty: this executable
  std::string mem;  // --mem (empty: not set)
  bool missing = false;  // array tasks only for the runs not finished, diverged, recorded or running
  bool allow_mixed_data = false;  // write the script even when done runs name another corpus build than here
};

// Slurm's --array value for ascending task ids: runs of consecutive ids as ranges ("0-3,5,8-9").
std::string slurm_array_spec(const std::vector<size_t>& tasks);
// The Slurm job-array script text: task i runs line i+1 of runs_txt; the array holds `tasks` (ids into runs_txt).
std::string slurm_script(const SweepSpec& spec, const std::vector<size_t>& tasks, const std::string& runs_txt,
                         const SlurmOptions& opt);
// The same for every run (tasks 0..n_runs-1).
std::string slurm_script(const SweepSpec& spec, size_t n_runs, const std::string& runs_txt, const SlurmOptions& opt);

// What write_slurm did: the array's task ids and, with `missing`, the runs it left out and why.
struct SlurmPlan {
  std::vector<size_t> tasks;  // indices into runs (= lines of runs.txt - 1)
  std::vector<std::string> finished;  // finished (or recorded) runs left out
  std::vector<std::string> diverged;  // diverged runs left out (divergence is deterministic: a result)
  std::vector<std::string> running;  // runs held by a live task or runner, left out
  std::vector<std::string> why;  // with `missing`, per task: "pending", "partial" or "failed: <its
                                 // failed.txt>", and "; resumes from its checkpoint at step 12/40"
  bool script_written = false;  // false when `missing` found nothing to submit
  std::string data_note;  // the corpus-build check's note or (allowed) warning; "" when none
};
// Writes every run's config.yaml, <out_dir>/runs.txt (absolute run dirs, one per line, always every run, so task i
// is run i in every submission), the manifest and the script (not when `missing` leaves no task). Like `sweep run`,
// first checks the corpus build (check_corpus_build, sweep/runner.h): UserError, nothing written, when runs still to
// do would train on other data than the sweep's done runs, unless allow_mixed_data.
SlurmPlan write_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SlurmOptions& opt);

}  // namespace pg
