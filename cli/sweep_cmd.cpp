// Seed/variant sweeps: `pagegram sweep run|prepare|status|record|expand|slurm|collect|finished`. The work is in
// sweep/; this file only parses arguments and prints (the runner's events on stderr).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/output.h"
#include "core/sysinfo.h"
#include "sweep/collect.h"
#include "sweep/records.h"
#include "sweep/runner.h"
#include "sweep/slurm.h"
#include "sweep/spec.h"
#include "sweep/status.h"

namespace pg::cli {
namespace {

// The runner's events on stderr: an updating progress line on a terminal, plain lines otherwise.
void print_sweep_event(const SweepEvent& e) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (e.kind == SweepEvent::kProgress) {
    if (tty) std::fprintf(stderr, "\r\033[K%s", e.text.c_str());
    else std::fprintf(stderr, "%s\n", e.text.c_str());
    std::fflush(stderr);
    return;
  }
  if (e.kind == SweepEvent::kSummary && tty) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", e.text.c_str());
}

}  // namespace

namespace {
// `pagegram sweep run`.
void register_sweep_run(CLI::App* sweep) {
  static std::string spec_path, binary;
  static std::vector<std::string> only;
  static int64_t parallel = 0;
  static bool dry_run = false, commit = false, allow_mixed_data = false;
  static int nice = -1;
  CLI::App* c = sweep->add_subcommand("run",
                                      "run every unfinished run of a sweep (finished runs are skipped, "
                                      "interrupted ones resume from their checkpoints)");
  c->add_option("SPEC", spec_path, "sweep file (experiments/*/sweep.yaml)")->required();
  c->add_option("--parallel", parallel,
                "runs at a time (default: the sweep's 'parallel'); threads per run = cores / N");
  c->add_flag("--dry-run", dry_run, "list the runs, their hashes and what would be done; write nothing");
  c->add_option("--pagegram", binary, "pagegram binary for the runs (default: this one)");
  c->add_option("--nice", nice,
                "run in the background at this priority (0-19; its runs too): nice and, where the "
                "kernel schedules by session (autogroup) and the sweep was started with setsid, its "
                "session's nice, so benchmarks and builds beside it keep their speed")
      ->check(CLI::Range(0, 19));
  c->add_option("--only", only,
                "run only the runs whose name matches this shell pattern, e.g. '*-s[012]' or "
                "'pagegram_s*' (repeatable; default: every run)");
  c->add_flag("--commit", commit,
              "git-commit each run's record as the run finishes (that file alone, so a sweep "
              "resumes from the repository on any machine; other staged changes stay out)");
  c->add_flag("--allow-mixed-data", allow_mixed_data,
              "run even when the sweep's finished runs (their logs or records) name another corpus build than the "
              "one prepared here (refused by default: the new runs would train on other windows)");
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    SweepRunOptions opt;
    opt.parallel = parallel;
    opt.binary = binary;
    opt.only = only;
    opt.commit = commit;
    opt.allow_mixed_data = allow_mixed_data;
    if (dry_run) {
      const SweepPlan plan = plan_sweep(spec, opt);
      std::printf("%s\n", plan.header.c_str());
      for (const SweepPlanRow& row : plan.rows)
        std::printf("%-32s %s  %-22s %s\n", row.name.c_str(), row.hash.c_str(), row.action.c_str(), row.sets.c_str());
      std::printf("%s\n", plan.footer.c_str());
      return;
    }
    if (nice >= 0) std::fprintf(stderr, "sweep: %s\n", run_in_background(nice).c_str());
    opt.progress_seconds = isatty(STDERR_FILENO) ? 0.0 : 60.0;
    SweepRunResult r = run_sweep(spec, opt, print_sweep_event);
    std::printf("%s", sweep_status_table(spec, expand_sweep(spec)).c_str());
    if (r.interrupted) throw CLI::RuntimeError(130);
    if (!r.failed.empty()) {
      std::string names;
      for (const auto& n : r.failed) names += (names.empty() ? "" : ", ") + n;
      throw UserError(str(r.failed.size(), " of ", r.total, " runs failed: ", names,
                          " (hint: see <run dir>/train.out; `pagegram sweep run` again retries them)"));
    }
  });
}

// `pagegram sweep prepare`.
void register_sweep_prepare(CLI::App* sweep) {
  static std::string spec_path;
  CLI::App* c = sweep->add_subcommand("prepare",
                                      "build (or find cached) the tokenizer and token stores every run "
                                      "needs, once per distinct data + tokenizer section");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    for (const auto& l : prepare_sweep_data(expand_sweep(spec))) std::printf("%s\n", l.c_str());
  });
}

// `pagegram sweep status`.
void register_sweep_status(CLI::App* sweep) {
  static std::string spec_path;
  CLI::App* c = sweep->add_subcommand("status",
                                      "one line per run: state (pending / partial / running / finished / "
                                      "diverged / failed), steps, checkpoint, final held-out loss");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    std::printf("%s", sweep_status_table(spec, expand_sweep(spec)).c_str());
  });
}

// `pagegram sweep record`.
void register_sweep_record(CLI::App* sweep) {
  static std::string spec_path;
  CLI::App* c = sweep->add_subcommand("record",
                                      "write the compact record (<sweep dir>/records/<run>-<hash>.json) of "
                                      "every finished or diverged run directory; records are committed");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    const std::vector<SweepRun> runs = expand_sweep(spec);
    const std::vector<std::string> written = write_sweep_records(spec, runs);
    for (const std::string& p : written) std::printf("%s\n", p.c_str());
    std::printf("%zu of %zu runs recorded; the sweep's expansion: %s\n", written.size(), runs.size(),
                write_sweep_expansion(spec, runs).c_str());
  });
}

// `pagegram sweep expand`.
void register_sweep_expand(CLI::App* sweep) {
  static std::string spec_path;
  static bool to_stdout = false;
  CLI::App* c = sweep->add_subcommand("expand",
                                      "write <sweep dir>/records/expansion.json: every run's name, config hash, "
                                      "overrides and resolved config, as this build expands the sweep file "
                                      "(what experiments/report.py reads; commit it beside the records)");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->add_flag("--stdout", to_stdout, "print it instead of writing it");
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    const std::vector<SweepRun> runs = expand_sweep(spec);
    if (to_stdout) std::printf("%s", sweep_expansion_json(spec, runs).c_str());
    else std::printf("%s: %zu runs\n", write_sweep_expansion(spec, runs).c_str(), runs.size());
  });
}

// `pagegram sweep slurm`.
void register_sweep_slurm(CLI::App* sweep) {
  static std::string spec_path;
  static SlurmOptions opt;
  CLI::App* c = sweep->add_subcommand("slurm",
                                      "write the runs' config.yaml files, <out_dir>/runs.txt and a Slurm "
                                      "job-array script (one array task per run; --missing: only the "
                                      "unfinished runs)");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->add_option("--out", opt.script, "job script to write (submit it with sbatch)")->required();
  c->add_option("--partition", opt.partition, "Slurm partition (default: the cluster's)");
  c->add_option("--time", opt.time, "time limit per run, HH:MM:SS")->capture_default_str();
  c->add_option("--cpus", opt.cpus, "CPUs per task (= train.threads)")->capture_default_str();
  c->add_option("--mem", opt.mem, "memory per task, e.g. 8G (default: not set)");
  c->add_option("--pagegram", opt.binary, "pagegram binary on the cluster (default: this one)");
  c->add_flag("--missing", opt.missing,
              "array tasks only for the runs not finished (pending, partial, failed): "
              "resubmits failed, cancelled or timed-out tasks; finished, diverged, "
              "recorded and running runs are left out");
  c->add_flag("--allow-mixed-data", opt.allow_mixed_data,
              "write the script even when the sweep's finished runs name another corpus build than the one "
              "prepared here (refused by default, as `sweep run`)");
  static bool force = false;
  c->add_flag("--force", force, "replace --out even when it is not a job script this command wrote");
  c->callback([] {
    check_output_path(opt.script, "pagegram-slurm-script", force, "--out");  // before any work
    SweepSpec spec = load_sweep(spec_path);
    std::vector<SweepRun> runs = expand_sweep(spec);
    const SlurmPlan plan = write_slurm(spec, runs, opt);
    if (!plan.data_note.empty()) std::printf("%s\n", plan.data_note.c_str());
    const std::string out = std::filesystem::absolute(spec.out_dir()).lexically_normal().string();
    if (opt.missing) {
      auto names = [](const std::vector<std::string>& v) {
        std::string s;
        for (size_t i = 0; i < v.size() && i < 8; ++i) s += (s.empty() ? "" : ", ") + v[i];
        return v.size() > 8 ? s + ", ..." : s;
      };
      for (size_t k = 0; k < plan.tasks.size(); ++k)
        std::printf("task %-4zu %-32s %s\n", plan.tasks[k], runs[plan.tasks[k]].name.c_str(), plan.why[k].c_str());
      if (!plan.running.empty())
        std::printf("left out %zu running (a task or runner holds them): %s\n", plan.running.size(),
                    names(plan.running).c_str());
      if (!plan.diverged.empty())
        std::printf("left out %zu diverged (a result; delete the run directory to run it again): %s\n",
                    plan.diverged.size(), names(plan.diverged).c_str());
      if (!plan.script_written) {
        std::printf("nothing to submit: %zu of %zu runs finished, %zu diverged, %zu running; %s not written\n",
                    plan.finished.size(), runs.size(), plan.diverged.size(), plan.running.size(), opt.script.c_str());
        return;
      }
      std::printf("wrote %s (%zu of %zu runs: array %s; %zu finished left out)\n", opt.script.c_str(),
                  plan.tasks.size(), runs.size(), slurm_array_spec(plan.tasks).c_str(), plan.finished.size());
    } else {
      std::printf("wrote %s (%zu array tasks), %s/runs.txt, %s/sweep.json and %zu config.yaml files\n",
                  opt.script.c_str(), runs.size(), out.c_str(), out.c_str(), runs.size());
    }
    std::printf("submit: sbatch %s\n", opt.script.c_str());
  });
}

// `pagegram sweep collect`.
void register_sweep_collect(CLI::App* sweep) {
  static std::string spec_path;
  static std::vector<std::string> from;
  CLI::App* c = sweep->add_subcommand("collect",
                                      "copy finished runs with the same name and config hash from other "
                                      "machines' directories into this sweep's out_dir");
  c->add_option("SPEC", spec_path, "sweep file")->required();
  c->add_option("--from", from, "a directory holding run directories (repeatable)")->required();
  c->callback([] {
    SweepSpec spec = load_sweep(spec_path);
    std::vector<SweepRun> runs = expand_sweep(spec);
    CollectResult r = collect_sweep(spec, runs, from);
    for (const auto& m : r.merged) std::printf("merged   %s\n", m.c_str());
    for (const auto& m : r.refused) std::printf("refused  %s\n", m.c_str());
    std::printf("collect %s: %zu merged, %zu already here, %zu finished nowhere, %zu refused\n", spec.name().c_str(),
                r.merged.size(), r.had.size(), r.missing.size(), r.refused.size());
    write_sweep_manifest(spec, runs);
  });
}

// `pagegram sweep finished`.
void register_sweep_finished(CLI::App* sweep) {
  static std::string dir;
  CLI::App* c = sweep->add_subcommand("finished",
                                      "exit 0 when RUN_DIR/log.h5 says finished, 1 otherwise "
                                      "(used by the Slurm script)");
  c->add_option("RUN_DIR", dir, "a run directory")->required();
  c->callback([] {
    if (!run_dir_finished(dir)) {
      std::printf("%s: not finished (no log.h5 whose status is finished)\n", dir.c_str());
      throw CLI::RuntimeError(1);
    }
    std::printf("%s: finished\n", dir.c_str());
  });
}

}  // namespace

void register_sweep_commands(CLI::App& app) {
  CLI::App* sweep = app.add_subcommand("sweep", "seed/variant sweeps: run locally, status, Slurm job arrays, collect");
  sweep->require_subcommand(1);
  register_sweep_run(sweep);
  register_sweep_prepare(sweep);
  register_sweep_status(sweep);
  register_sweep_record(sweep);
  register_sweep_expand(sweep);
  register_sweep_slurm(sweep);
  register_sweep_collect(sweep);
  register_sweep_finished(sweep);
}

}  // namespace pg::cli
