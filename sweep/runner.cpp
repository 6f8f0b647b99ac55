// Implementation of sweep/runner.h: fork/exec of `pagegram train` children, CPU slices, locks, signals.
#include "sweep/runner.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "core/h5.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/timer.h"
#include "data/pipeline.h"
#include "sweep/records.h"
#include "sweep/status.h"
#include "train/overhead.h"
#include "train/run_log.h"

namespace pg {

namespace fs = std::filesystem;

double sweep_seconds_per_token(std::vector<double> this_runner, const std::vector<double>& before) {
  if (this_runner.size() < 3) this_runner.insert(this_runner.end(), before.begin(), before.end());
  return this_runner.empty() ? -1.0 : median(std::move(this_runner));
}

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot resolve /proc/self/exe (hint: pass the pagegram binary explicitly)");
  return p.string();
}

std::vector<std::string> prepare_sweep_data(const std::vector<SweepRun>& runs) {
  std::vector<std::string> lines;
  std::set<std::string> seen;
  for (const auto& r : runs) {
    if (!seen.insert(cfg::dump(r.config.data) + "\n" + cfg::dump(r.config.tokenizer)).second) continue;
    const data::TokenizeSummary s = data::tokenize(r.config.data, r.config.tokenizer, r.dir + "/config.yaml");
    lines.push_back(str(s.cache_hit ? "cached " : "built  ", s.store_dir, ": train ", s.train.tokens,
                        " tokens, held-out ", s.heldout.tokens, " (tokenizer ", s.tokenizer.key, ", as run ", r.name,
                        ")"));
  }
  return lines;
}

// -----------------------------------------------------------------------------------------------------------
// Local runner.

namespace {

volatile sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

struct Child {
  size_t run = 0;  // index into runs
  pid_t pid = -1;
  int lock_fd = -1;
  int slot = 0;  // CPU slice
  Timer timer;
  int64_t start_step = 0, step = 0;
};

// fork + exec of `binary args...` with stdout/stderr appended to `out`, pinned to `cpus`, killed with the runner.
pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& out,
            const std::vector<int>& cpus) {
  // Everything the child needs is prepared before fork: only async-signal-safe calls run after it.
  std::vector<std::string> all{binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str("cannot open ", out, ": ", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw IoError(str("fork failed: ", std::strerror(errno), " (hint: too many processes?)"));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the runner's death stops the run (it resumes from its checkpoint)
    if (::getppid() != parent) ::_exit(1);
    ::sched_setaffinity(0, sizeof(set), &set);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    const char msg[] = "pagegram sweep: exec of the pagegram binary failed\n";
    [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

// Runs a command (PATH lookup) with stdout + stderr captured; returns the exit code (-1: did not exit normally).
int run_captured(const std::vector<std::string>& args, std::string& output) {
  std::vector<std::string> all = args;
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw IoError(str("pipe failed: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw IoError(str("fork failed: ", std::strerror(errno), " (hint: too many processes?)"));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  output.clear();
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

int64_t logged_step(const std::string& dir) {
  try {
    if (!fs::exists(dir + "/log.h5")) return 0;
    h5::File f = h5::File::open(dir + "/log.h5");
    auto s = f.root().sub("train").read<int64_t>("step");
    return s.empty() ? 0 : s.back();
  } catch (const IoError&) {
    return -1;  // being replaced right now: keep the previous value
  }
}

}  // namespace

std::string commit_record(const std::string& path, const std::string& message) {
  const fs::path file = fs::absolute(path);
  const std::string dir = file.parent_path().string(), name = file.filename().string();
  std::string out;
  for (int attempt = 0;; ++attempt) {
    int rc = run_captured({"git", "-C", dir, "add", "--", name}, out);
    if (rc == 0)
      rc = run_captured({"git", "-C", dir, "commit", "-q", "--no-verify", "-m", message, "--only", "--", name}, out);
    if (rc == 0) break;
    // Another git process (the researcher's own commit, a second runner) holds the index: wait and retry.
    const bool locked = out.find("index.lock") != std::string::npos;
    if (!locked || attempt >= 30)
      throw IoError(
          str("git commit of ", path, " failed (exit ", rc, "): ", last_line(out),
              " (hint: run the sweep inside a git work tree with user.name/user.email set, or without --commit)"));
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  run_captured({"git", "-C", dir, "rev-parse", "--short", "HEAD"}, out);
  return str("committed ", last_line(out));
}

namespace {

// commit_record for the runner: a failure is reported in the run's line and the sweep goes on (the record stays
// written; `git add` it by hand).
std::string commit_or_warn(const std::string& record, const std::string& message) {
  try {
    return commit_record(record, message);
  } catch (const IoError& e) {
    return str("NOT committed: ", e.what());
  }
}

// The runs of a sweep and what the runner does with each: finished (or recorded) and diverged runs are skipped,
// unselected ones left out, the rest queued.
struct Classified {
  std::vector<SweepRun> runs;
  std::vector<RunStatus> initial;
  std::vector<bool> selected;
  std::vector<size_t> queue;
  SweepRunResult res;
  int64_t parallel = 1, cores = 1, threads = 1;
  std::vector<int> cpus;
  std::string binary, header;
  std::string data_mismatch;  // finished runs trained on another corpus build than the queued runs would
};

std::string data_key(const SweepRun& r) { return cfg::dump(r.config.data) + "\n" + cfg::dump(r.config.tokenizer); }

}  // namespace

CorpusBuildCheck check_corpus_build(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                    const std::vector<bool>& done, const std::vector<size_t>& to_run) {
  CorpusBuildCheck out;
  if (to_run.empty()) return out;
  std::map<std::string, std::string> here;  // data + tokenizer section -> fingerprint here ("" when not prepared)
  std::set<std::string> queued;
  for (size_t q : to_run) queued.insert(data_key(runs[q]));
  std::vector<std::string> other, unnamed;
  std::string their, ours;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!done[i] || !queued.count(data_key(runs[i]))) continue;
    auto [it, fresh] = here.try_emplace(data_key(runs[i]));
    if (fresh) {
      try {
        it->second = data::dataset_fingerprint(runs[i].config.data, runs[i].config.tokenizer);
      } catch (const UserError&) {
        // no corpus or stores here yet: the runs themselves say what to build
      }
    }
    if (it->second.empty()) continue;
    const std::string d = run_data_fingerprint(spec, runs[i]);
    if (d.empty()) unnamed.push_back(runs[i].name);
    else if (d != it->second) {
      if (other.empty()) their = d, ours = it->second;
      other.push_back(runs[i].name);
    }
  }
  auto names = [](const std::vector<std::string>& v) {
    std::string o;
    for (size_t k = 0; k < v.size() && k < 4; ++k) o += (k ? ", " : "") + v[k];
    return v.size() > 4 ? o + str(", ... (", v.size(), " in all)") : o;
  };
  if (!other.empty())
    out.mismatch =
        str("sweep ", spec.name(), ": ", other.size(), " finished run", other.size() == 1 ? "" : "s", " (",
            names(other), ") trained on another corpus build than the one prepared here (theirs: '", their,
            "'; here: '", ours, "'): new runs would train on other windows than the runs they are compared ",
            "with (hint: finish the sweep where its runs were trained, or remove their records to rerun the ",
            "sweep here, or pass --allow-mixed-data)");
  if (!unnamed.empty())
    out.note = str("note: ", unnamed.size(), " finished run", unnamed.size() == 1 ? "" : "s", " (", names(unnamed),
                   unnamed.size() == 1 ? ") names" : ") name",
                   " no corpus build (records before 2026-12-02): not checked against the data here");
  return out;
}

namespace {

Classified classify(const SweepSpec& spec, const SweepRunOptions& opt, bool write_records) {
  Classified c;
  c.runs = expand_sweep(spec);
  const std::vector<SweepRun>& runs = c.runs;
  c.parallel = opt.parallel > 0 ? opt.parallel : spec.f.parallel;
  c.cpus = allowed_cpus();
  c.cores = opt.cores > 0 ? opt.cores : static_cast<int64_t>(c.cpus.size());
  c.threads = std::max<int64_t>(1, c.cores / c.parallel);
  c.binary = opt.binary.empty() ? self_executable() : opt.binary;
  SweepRunResult& res = c.res;
  res.total = static_cast<int64_t>(runs.size());
  std::vector<RunStatus>& initial = c.initial;
  std::vector<bool>& selected = c.selected;
  initial.resize(runs.size());
  selected.assign(runs.size(), true);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!opt.only.empty())
      selected[i] = std::any_of(opt.only.begin(), opt.only.end(), [&](const std::string& pat) {
        return fnmatch(pat.c_str(), runs[i].name.c_str(), 0) == 0;
      });
    initial[i] = run_status(runs[i]);
    if ((initial[i].state == RunState::kFinished || initial[i].state == RunState::kDiverged) &&
        !record_exists(spec, runs[i]) && write_records) {
      const std::string rec = write_run_record(spec, runs[i]);  // a run finished before records existed (or elsewhere)
      if (opt.commit) commit_or_warn(rec, str(spec.name(), ": record of ", runs[i].name));
    }
    if (initial[i].state != RunState::kFinished && initial[i].state != RunState::kDiverged &&
        record_exists(spec, runs[i])) {
      initial[i].state = RunState::kFinished;  // recorded (committed), possibly on another machine: not rerun
      ++res.already_finished;
    } else if (initial[i].state == RunState::kFinished) ++res.already_finished;
    else if (initial[i].state == RunState::kDiverged) res.diverged.push_back(runs[i].name);
    else if (!selected[i]) ++res.not_selected;
    else c.queue.push_back(i);
  }
  if (!opt.only.empty() && std::none_of(selected.begin(), selected.end(), [](bool b) { return b; })) {
    std::string pats;
    for (const auto& p : opt.only) pats += (pats.empty() ? "" : " ") + p;
    throw UserError(str("sweep ", spec.name(), ": --only ", pats, " matches none of its ", runs.size(),
                        " runs (hint: `pagegram sweep status ", spec.path, "` lists the run names)"));
  }
  std::vector<bool> done(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    done[i] = initial[i].state == RunState::kFinished || initial[i].state == RunState::kDiverged;
  const CorpusBuildCheck data = check_corpus_build(spec, runs, done, c.queue);
  c.data_mismatch = data.mismatch;
  const std::string& data_note = data.note;
  c.header =
      str("sweep ", spec.name(), ": ", runs.size(), " runs, ", res.already_finished, " finished, ", c.queue.size(),
          " to run", res.not_selected ? str(" (", res.not_selected, " left out by --only)") : std::string(), ", ",
          c.parallel, " at a time x ", c.threads, " threads, in ",
          fs::absolute(spec.out_dir()).lexically_normal().string());
  if (!data_note.empty()) c.header += "\n" + data_note;
  if (!c.data_mismatch.empty() && opt.allow_mixed_data)
    c.header += "\nwarning (--allow-mixed-data): " + c.data_mismatch;
  return c;
}

}  // namespace

SweepPlan plan_sweep(const SweepSpec& spec, const SweepRunOptions& opt) {
  const Classified c = classify(spec, opt, false);
  SweepPlan plan;
  plan.header = c.header;
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const RunStatus& s = c.initial[i];
    SweepPlanRow row;
    row.name = c.runs[i].name;
    row.hash = c.runs[i].hash;
    row.action = s.state == RunState::kFinished   ? "skip (finished)"
                 : s.state == RunState::kDiverged ? str("skip (diverged at step ", s.step, ")")
                 : !c.selected[i]                 ? std::string("skip (not selected)")
                 : s.state == RunState::kRunning  ? str("running (step ", s.step, ")")
                 : s.checkpoint_step > 0          ? str("resume at step ", s.checkpoint_step, "/", s.total_steps)
                                                  : str("run ", s.total_steps, " steps");
    for (const auto& x : c.runs[i].overrides)
      row.sets += x.find_first_of(" \"'$*?") == std::string::npos ? " --set " + x : " --set '" + x + "'";
    plan.rows.push_back(std::move(row));
  }
  plan.footer =
      str(c.runs.size(), " runs (", spec.f.seeds.size(), " seeds x ", spec.variants.size(), " variants",
          spec.grid.empty() ? std::string() : str(" x grid"), ", at most 100000); base ", spec.base_path(), "; binary ",
          c.binary, "; threads per run ", c.threads, " (", c.cores, " cores / parallel ", c.parallel, ")");
  if (!c.data_mismatch.empty() && !opt.allow_mixed_data)
    plan.footer += "\n`sweep run` would refuse: " + c.data_mismatch;
  return plan;
}

using Emit = std::function<void(SweepEvent::Kind, const std::string&, const std::string&)>;

// Starts run i in a free CPU slot, unless another runner holds its lock or it finished meanwhile (then nullopt,
// counted in res): its config written, a log without a checkpoint dropped, `pagegram train --resume` spawned.
std::optional<Child> start_run(const SweepRun& r, size_t i, const RunStatus& status, const std::string& binary,
                               int64_t threads, const std::vector<int>& cpus, std::vector<bool>& slot_used,
                               SweepRunResult& res, const Emit& emit) {
  fs::create_directories(r.dir);
  const std::string lock = r.dir + "/.lock";
  const int lfd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lfd < 0) throw IoError(str("cannot open ", lock, ": ", std::strerror(errno)));
  if (::flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lfd);
    res.locked.push_back(r.name);
    emit(SweepEvent::kSkipped, r.name, str("skip ", r.name, ": another runner is running it"));
    return std::nullopt;
  }
  if (run_dir_finished(r.dir)) {  // finished by someone else since we looked
    ::close(lfd);
    ++res.already_finished;
    return std::nullopt;
  }
  write_run_config(r);
  fs::remove(r.dir + "/failed.txt");
  // Without a checkpoint the run starts over: drop a log of steps that no checkpoint holds.
  if (!fs::exists(r.dir + "/checkpoint.h5")) fs::remove(r.dir + "/log.h5");
  Child c;
  c.run = i;
  c.lock_fd = lfd;
  c.slot = static_cast<int>(std::find(slot_used.begin(), slot_used.end(), false) - slot_used.begin());
  slot_used[static_cast<size_t>(c.slot)] = true;
  std::vector<int> mine;
  for (int64_t t = 0; t < threads; ++t)
    mine.push_back(cpus[static_cast<size_t>((c.slot * threads + t) % static_cast<int64_t>(cpus.size()))]);
  c.start_step = c.step = std::max<int64_t>(0, status.checkpoint_step);
  c.pid =
      spawn(binary, {"train", "--config", r.dir + "/config.yaml", "--resume", "--set", str("train.threads=", threads)},
            r.dir + "/train.out", mine);
  ++res.launched;
  emit(SweepEvent::kStart, r.name,
       str("start ", r.name, c.start_step > 0 ? str(" (resuming at step ", c.start_step, ")") : std::string(), " -> ",
           r.dir, "/train.out"));
  return c;
}

// A child that exited: finished (record written, committed when asked), diverged (kept as a result) or failed
// (failed.txt, retried by the next `sweep run`).
void report_exit(const SweepSpec& spec, const SweepRunOptions& opt, const SweepRun& r, const Child& c, pid_t w,
                 int wstatus, SweepRunResult& res, std::vector<double>& done_rates, const Emit& emit) {
  const auto tps = static_cast<double>(r.config.train.tokens_per_step);
  const double secs = c.timer.seconds();
  const int64_t end_step = logged_step(r.dir);
  const bool ok = w == c.pid && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  if (ok && run_dir_finished(r.dir)) {
    ++res.finished;
    // A resumed run's short tail carries its start-up time: only runs that did at least half their steps here.
    if (2 * (end_step - c.start_step) >= r.config.train.total_steps())
      done_rates.push_back(secs / (static_cast<double>(end_step - c.start_step) * tps));
    const RunStatus s = run_status(r);
    const std::string rec = write_run_record(spec, r);
    emit(SweepEvent::kDone, r.name,
         str("done  ", r.name, " in ", fmt_duration(secs), ": held-out loss ", s.final_loss, "; record ", rec,
             opt.commit ? str("; ", commit_or_warn(rec, str(spec.name(), ": record of ", r.name, " (held-out ",
                                                            s.final_loss, ")")))
                        : std::string()));
  } else if (run_status(r).state == RunState::kDiverged) {
    res.diverged.push_back(r.name);
    const std::string rec = write_run_record(spec, r);
    emit(SweepEvent::kDiverged, r.name,
         str("DIVERGED ", r.name, " at step ", end_step, " (kept as a result",
             opt.commit ? str("; ", commit_or_warn(rec, str(spec.name(), ": record of ", r.name, " (diverged)")))
                        : std::string(),
             "; last lines of its train.out:)\n", tail_lines(r.dir + "/train.out", 3)));
  } else {
    std::string why = !ok ? (WIFSIGNALED(wstatus) ? str("killed by signal ", WTERMSIG(wstatus))
                                                  : str("exit code ", WEXITSTATUS(wstatus)))
                          : std::string("exited 0 but log.h5 does not say finished");
    res.failed.push_back(r.name);
    write_text_atomic(r.dir + "/failed.txt", str(why, " at step ", end_step, " (", iso_time_now(), ")\n"));
    emit(SweepEvent::kFailed, r.name,
         str("FAILED ", r.name, ": ", why, "; last lines of ", r.dir, "/train.out:\n",
             tail_lines(r.dir + "/train.out", 12), "    (the sweep goes on; `pagegram sweep run` again retries it)"));
  }
}

SweepRunResult run_sweep(const SweepSpec& spec, const SweepRunOptions& opt, const SweepEventFn& on_event) {
  Classified c = classify(spec, opt, true);
  if (!c.data_mismatch.empty() && !opt.allow_mixed_data) throw UserError(c.data_mismatch);
  const std::vector<SweepRun>& runs = c.runs;
  const std::vector<RunStatus>& initial = c.initial;
  const std::vector<size_t>& queue = c.queue;
  const std::vector<int>& cpus = c.cpus;
  const int64_t parallel = c.parallel, threads = c.threads;
  const std::string& binary = c.binary;
  SweepRunResult& res = c.res;
  const Emit emit = [&](SweepEvent::Kind kind, const std::string& run, const std::string& text) {
    if (on_event) on_event(SweepEvent{kind, run, text});
  };
  emit(SweepEvent::kHeader, "", c.header);
  for (const auto& n : res.diverged)
    emit(SweepEvent::kSkipped, n,
         str("skip ", n, ": diverged (a result, not retried; delete its directory to run it again)"));
  write_sweep_manifest(spec, runs);
  {  // the expansion file beside the records (what report.py reads): rewritten when it differs, committed with them
    const std::string file = expansion_path(spec), text = sweep_expansion_json(spec, runs);
    std::error_code ec;
    if (!fs::exists(file, ec) || read_file(file) != text) {
      write_text_atomic(file, text);
      emit(SweepEvent::kHeader, "",
           str("expansion: ", file,
               opt.commit ? str(" (", commit_or_warn(file, str(spec.name(), ": expansion")), ")") : ""));
    }
  }

  // Stop cleanly on SIGINT/SIGTERM: children are stopped and resume from their checkpoints next time.
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  g_stop_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<Child> active;
  std::vector<bool> slot_used(static_cast<size_t>(parallel), false);
  size_t next = 0;
  // ETA: remaining tokens (runs differ in tokens per step) at sweep_seconds_per_token of the runs finished by this
  // runner and before it (their logs' or records' training time), else at the rate of the running runs so far.
  const auto tps = [&](size_t i) { return static_cast<double>(runs[i].config.train.tokens_per_step); };
  std::vector<double> done_rates, before_rates;  // seconds per token of each finished run
  for (size_t i = 0; i < runs.size(); ++i)
    if (initial[i].state == RunState::kFinished && initial[i].elapsed_s > 0 && initial[i].total_steps > 0)
      before_rates.push_back(initial[i].elapsed_s / (static_cast<double>(initial[i].total_steps) * tps(i)));
  Timer since_line;

  auto progress_line = [&] {
    if (!on_event) return;
    double remaining = 0;  // tokens
    for (size_t q = next; q < queue.size(); ++q) {
      const RunStatus& s = initial[queue[q]];
      remaining += static_cast<double>(s.total_steps - std::max<int64_t>(0, s.checkpoint_step)) * tps(queue[q]);
    }
    const double spt = sweep_seconds_per_token(done_rates, before_rates);
    const bool from_running = spt < 0;
    double rate_num = from_running ? 0.0 : spt, rate_den = from_running ? 0.0 : 1.0;
    std::string cur;
    for (const Child& c : active) {
      const SweepRun& r = runs[c.run];
      const int64_t total = r.config.train.total_steps();
      remaining += static_cast<double>(total - c.step) * tps(c.run);
      cur += str(cur.empty() ? " " : "  ", r.name, " ", c.step, "/", total);
      if (from_running && c.step > c.start_step)
        rate_num += c.timer.seconds(), rate_den += static_cast<double>(c.step - c.start_step) * tps(c.run);
    }
    const double eta = rate_den > 0 ? rate_num / rate_den * remaining / static_cast<double>(parallel) : -1;
    const int64_t done = res.already_finished + res.finished;
    std::string line = str("[sweep ", spec.name(), "] ", done, "/", res.total, " done",
                           res.failed.empty() ? std::string() : str(", ", res.failed.size(), " failed"), " |", cur,
                           " | ETA ", fmt_duration(eta));
    emit(SweepEvent::kProgress, "", line);
  };

  while (true) {
    // Start runs while slots are free.
    while (!g_stop_signal && static_cast<int64_t>(active.size()) < parallel && next < queue.size()) {
      const size_t i = queue[next++];
      std::optional<Child> child = start_run(runs[i], i, initial[i], binary, threads, cpus, slot_used, res, emit);
      if (child) active.push_back(std::move(*child));
    }
    if (active.empty()) break;
    if (g_stop_signal) break;

    std::this_thread::sleep_for(std::chrono::duration<double>(opt.poll_seconds));
    for (size_t a = 0; a < active.size();) {
      Child& c = active[a];
      const SweepRun& r = runs[c.run];
      int wstatus = 0;
      const pid_t w = ::waitpid(c.pid, &wstatus, WNOHANG);
      if (w == 0) {
        const int64_t s = logged_step(r.dir);
        if (s >= 0) c.step = s;
        ++a;
        continue;
      }
      report_exit(spec, opt, r, c, w, wstatus, res, done_rates, emit);
      ::close(c.lock_fd);
      slot_used[static_cast<size_t>(c.slot)] = false;
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(a));
    }
    if (since_line.seconds() >= opt.progress_seconds) {
      progress_line();
      since_line.reset();
    }
  }

  if (g_stop_signal && !active.empty()) {
    res.interrupted = true;
    for (Child& c : active) ::kill(c.pid, SIGTERM);
    for (Child& c : active) {
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.lock_fd);
    }
    emit(SweepEvent::kInterrupted, "",
         str("interrupted: stopped ", active.size(), " run(s); `pagegram sweep run` again resumes them from their ",
             "last checkpoints"));
  } else if (g_stop_signal) {
    res.interrupted = true;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  emit(SweepEvent::kSummary, "",
       str("sweep ", spec.name(), ": ", res.already_finished + res.finished, "/", res.total, " finished (",
           res.finished, " this time), ", res.failed.size(), " failed",
           res.diverged.empty() ? std::string() : str(", ", res.diverged.size(), " diverged"),
           res.locked.empty() ? std::string() : str(", ", res.locked.size(), " held by another runner")));
  return res;
}

}  // namespace pg
