// Implementation of sweep/slurm.h.
#include "sweep/slurm.h"

#include <filesystem>
#include <sstream>

#include "core/text.h"
#include "sweep/records.h"
#include "sweep/runner.h"
#include "sweep/status.h"
#include "train/run_log.h"

namespace pg {

namespace fs = std::filesystem;

std::string slurm_array_spec(const std::vector<size_t>& tasks) {
  std::string s;
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(tasks[i]);
    if (j > i) s += "-" + std::to_string(tasks[j]);
    i = j + 1;
  }
  return s.empty() ? "0" : s;
}

std::string slurm_script(const SweepSpec& spec, const std::vector<size_t>& tasks, const std::string& runs_txt,
                         const SlurmOptions& opt) {
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string bin = opt.binary.empty() ? self_executable() : opt.binary;
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "# Sweep '" << spec.name() << "': " << tasks.size() << " run" << (tasks.size() == 1 ? "" : "s")
    << " as a Slurm job array (one task per run" << (opt.missing ? ", only the runs not finished when written" : "")
    << ").\n";
  s << "# Written by `pagegram sweep slurm " << spec.path << (opt.missing ? " --missing" : "") << "` on " << host_name()
    << " at " << iso_time_now() << ".\n";
  s << "# Submit with `sbatch " << opt.script << "`. Task i runs line i+1 of " << runs_txt << ";\n";
  s << "# a finished run is skipped and an interrupted or requeued one resumes from its checkpoint.\n";
  s << "# Build the token stores first, on the cluster: `pagegram sweep prepare " << spec.path << "` (with\n";
  s << "# PAGEGRAM_CACHE on shared storage). Watch: `squeue`, `pagegram sweep status SPEC`. Failed or cancelled\n";
  s << "# tasks: `pagegram sweep slurm SPEC --out FILE --missing` writes an array of the unfinished runs only.\n";
  s << "# Merge results elsewhere: `pagegram sweep collect SPEC --from DIR`.\n";
  s << "#SBATCH --job-name=pg-" << spec.name() << "\n";
  s << "#SBATCH --array=" << slurm_array_spec(tasks) << "\n";
  s << "#SBATCH --nodes=1\n";
  s << "#SBATCH --ntasks=1\n";
  s << "#SBATCH --cpus-per-task=" << opt.cpus << "\n";
  s << "#SBATCH --time=" << opt.time << "\n";
  if (!opt.partition.empty()) s << "#SBATCH --partition=" << opt.partition << "\n";
  if (!opt.mem.empty()) s << "#SBATCH --mem=" << opt.mem << "\n";
  s << "#SBATCH --output=" << out << "/slurm-%A_%a.out\n";
  s << "#SBATCH --open-mode=append\n";
  s << "#SBATCH --requeue\n";
  s << "set -euo pipefail\n";
  s << "PAGEGRAM=" << bin << "\n";
  s << "RUN=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " << runs_txt << ")\n";
  s << "if [ -z \"$RUN\" ]; then echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 1; fi\n";
  s << "if \"$PAGEGRAM\" sweep finished \"$RUN\"; then echo \"$RUN: already finished\"; exit 0; fi\n";
  s << "# The sweep runner's lock (flock on $RUN/.lock, held by the training child too): one task or runner per run,\n";
  s << "# and `pagegram sweep status` shows the run as running.\n";
  s << "exec 9>>\"$RUN/.lock\"\n";
  s << "flock -n -E 75 9 || {\n";
  s << "  rc=$?\n";
  s << "  if [ $rc -eq 75 ]; then echo \"$RUN: another task or runner is running it; nothing to do\"; exit 0; fi\n";
  s << "  echo \"$RUN: flock $RUN/.lock failed (exit $rc): the run directories need a file system with locks\" >&2\n";
  s << "  exit $rc\n";
  s << "}\n";
  s << "# A task that fails (or is cancelled) leaves $RUN/failed.txt, shown by `pagegram sweep status`; the run's "
       "own\n";
  s << "# output is in $RUN/train.out.\n";
  s << "trap 'rc=$?; if [ $rc -ne 0 ]; then echo \"exit code $rc in Slurm task ${SLURM_ARRAY_JOB_ID:-?}_"
       "$SLURM_ARRAY_TASK_ID on $(hostname) at $(date -u +%FT%TZ)\" > \"$RUN/failed.txt\"; fi' EXIT\n";
  s << "trap 'exit 143' TERM\n";
  s << "rm -f \"$RUN/failed.txt\"\n";
  s << "# Without a checkpoint the run starts over: drop a log of steps that no checkpoint holds.\n";
  s << "if [ ! -e \"$RUN/checkpoint.h5\" ]; then rm -f \"$RUN/log.h5\"; fi\n";
  s << "echo \"$RUN: task $SLURM_ARRAY_TASK_ID on $(hostname) at $(date -u +%FT%TZ)\"\n";
  s << "\"$PAGEGRAM\" train --config \"$RUN/config.yaml\" --resume --set train.threads=$SLURM_CPUS_PER_TASK "
       ">> \"$RUN/train.out\" 2>&1\n";
  return s.str();
}

std::string slurm_script(const SweepSpec& spec, size_t n_runs, const std::string& runs_txt, const SlurmOptions& opt) {
  std::vector<size_t> all(n_runs);
  for (size_t i = 0; i < n_runs; ++i) all[i] = i;
  return slurm_script(spec, all, runs_txt, opt);
}

SlurmPlan write_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SlurmOptions& opt) {
  if (opt.script.empty()) throw UserError("sweep slurm: --out FILE is required (the job script)");
  if (opt.cpus < 1) throw UserError("sweep slurm: --cpus must be at least 1");
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string runs_txt = out + "/runs.txt";
  SlurmPlan plan;
  {  // as `sweep run`: no new runs on another corpus build than the sweep's done runs
    std::vector<bool> done(runs.size());
    std::vector<size_t> to_run;
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunState st = run_status(runs[i]).state;
      done[i] = st == RunState::kFinished || st == RunState::kDiverged || record_exists(spec, runs[i]);
      if (!done[i] && st != RunState::kRunning) to_run.push_back(i);
    }
    const CorpusBuildCheck data = check_corpus_build(spec, runs, done, to_run);
    if (!data.mismatch.empty() && !opt.allow_mixed_data) throw UserError(data.mismatch);
    plan.data_note = data.note;
    if (!data.mismatch.empty())
      plan.data_note += (plan.data_note.empty() ? "" : "\n") + ("warning (--allow-mixed-data): " + data.mismatch);
  }
  std::string lines;
  for (size_t i = 0; i < runs.size(); ++i) {
    const SweepRun& r = runs[i];
    lines += r.dir + "\n";
    if (!opt.missing) {
      write_run_config(r);
      plan.tasks.push_back(i);
      continue;
    }
    // As `sweep run` decides: finished, diverged and recorded runs are done; a locked one is running now.
    const RunStatus st = run_status(r);
    if (st.state == RunState::kFinished) plan.finished.push_back(r.name);
    else if (st.state == RunState::kDiverged) plan.diverged.push_back(r.name);
    else if (record_exists(spec, r)) plan.finished.push_back(r.name);
    else if (st.state == RunState::kRunning) plan.running.push_back(r.name);
    else {
      write_run_config(r);
      plan.tasks.push_back(i);
      std::string why = st.state == RunState::kPartial  ? "partial"
                        : st.state != RunState::kFailed ? "pending"
                        : st.note.empty()               ? "failed"
                                                        : "failed: " + st.note;
      if (st.checkpoint_step > 0)
        why += str("; resumes from its checkpoint at step ", st.checkpoint_step, "/", st.total_steps);
      plan.why.push_back(why);
    }
  }
  write_text_atomic(runs_txt, lines);
  write_sweep_manifest(spec, runs);
  if (opt.missing && plan.tasks.empty()) return plan;
  write_text_atomic(opt.script, slurm_script(spec, plan.tasks, runs_txt, opt));
  fs::permissions(opt.script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  plan.script_written = true;
  return plan;
}

}  // namespace pg
