// Implementation of sweep/slurm.h.
#include "sweep/slurm.h"

#include <filesystem>
#include <sstream>

#include "core/text.h"
#include "sweep/runner.h"
#include "sweep/status.h"
#include "train/run_log.h"

namespace pg {

namespace fs = std::filesystem;

std::string slurm_script(const SweepSpec& spec, size_t n_runs, const std::string& runs_txt, const SlurmOptions& opt) {
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string bin = opt.binary.empty() ? self_executable() : opt.binary;
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "# Sweep '" << spec.name() << "': " << n_runs << " runs as a Slurm job array (one task per run).\n";
  s << "# Written by `pagegram sweep slurm " << spec.path << "` on " << host_name() << " at " << iso_time_now() << ".\n";
  s << "# Submit with `sbatch " << opt.script << "`. Task i runs line i+1 of " << runs_txt << ";\n";
  s << "# a finished run is skipped and an interrupted or requeued one resumes from its checkpoint.\n";
  s << "# Build the token stores first, on the cluster: `pagegram sweep prepare " << spec.path << "` (with\n";
  s << "# PAGEGRAM_CACHE on shared storage). Merge results elsewhere: `pagegram sweep collect SPEC --from DIR`.\n";
  s << "#SBATCH --job-name=pg-" << spec.name() << "\n";
  s << "#SBATCH --array=0-" << (n_runs == 0 ? 0 : n_runs - 1) << "\n";
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
  s << "echo \"$RUN: task $SLURM_ARRAY_TASK_ID on $(hostname) at $(date -u +%FT%TZ)\"\n";
  s << "\"$PAGEGRAM\" train --config \"$RUN/config.yaml\" --resume --set train.threads=$SLURM_CPUS_PER_TASK "
       ">> \"$RUN/train.out\" 2>&1\n";
  return s.str();
}

void write_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SlurmOptions& opt) {
  if (opt.script.empty()) throw UserError("sweep slurm: --out FILE is required (the job script)");
  if (opt.cpus < 1) throw UserError("sweep slurm: --cpus must be at least 1");
  const std::string out = fs::absolute(spec.out_dir()).lexically_normal().string();
  const std::string runs_txt = out + "/runs.txt";
  std::string lines;
  for (const auto& r : runs) {
    write_run_config(r);
    lines += r.dir + "\n";
  }
  write_text_atomic(runs_txt, lines);
  write_sweep_manifest(spec, runs);
  write_text_atomic(opt.script, slurm_script(spec, runs.size(), runs_txt, opt));
  fs::permissions(opt.script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
}

}  // namespace pg
