// Slurm job arrays of a sweep: every run's config.yaml, <out_dir>/runs.txt and a job script (one array task per
// run; a task skips a finished run and resumes an interrupted one).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace pg {

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

}  // namespace pg
