// Implementation of sweep/status.h.
#include "sweep/status.h"
#include "sweep/records.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "core/h5.h"
#include "core/text.h"

namespace pg {

namespace fs = std::filesystem;

// True when a live runner holds <dir>/.lock (flock is released when its holder dies).
bool run_dir_locked(const std::string& dir) {
  const std::string p = dir + "/.lock";
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return locked;
}

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::kPending:
      return "pending";
    case RunState::kPartial:
      return "partial";
    case RunState::kRunning:
      return "running";
    case RunState::kFinished:
      return "finished";
    case RunState::kDiverged:
      return "diverged";
    case RunState::kFailed:
      return "failed";
  }
  return "?";
}

bool run_dir_finished(const std::string& dir) {
  const std::string log = dir + "/log.h5";
  if (!fs::exists(log)) return false;
  try {
    h5::File f = h5::File::open(log);
    h5::Group r = f.root();
    return r.has_attr("status") && r.attr_string("status") == "finished";
  } catch (const IoError&) {
    return false;
  }
}

RunStatus run_status(const SweepRun& run) {
  RunStatus st;
  st.total_steps = run.config.train.total_steps();
  const std::string log = run.dir + "/log.h5", ckpt = run.dir + "/checkpoint.h5", failed = run.dir + "/failed.txt";
  std::string status;
  bool any = false;
  if (fs::exists(log)) {
    any = true;
    try {
      h5::File f = h5::File::open(log);
      h5::Group r = f.root();
      if (r.has_attr("status")) status = r.attr_string("status");
      auto steps = r.sub("train").read<int64_t>("step");
      if (!steps.empty()) st.step = steps.back();
      auto el = r.sub("train").read<double>("elapsed_s");
      if (!el.empty()) st.elapsed_s = el.back();
      auto loss = r.sub("eval").read<double>("loss");
      if (!loss.empty()) st.final_loss = loss.back();
    } catch (const IoError& e) {
      st.note = str("log unreadable: ", e.what());
    }
  }
  if (fs::exists(ckpt)) {
    any = true;
    try {
      h5::File f = h5::File::open(ckpt);
      st.checkpoint_step = f.root().attr_int("step");
    } catch (const IoError&) {
    }
  }
  const bool has_failed = fs::exists(failed);
  if (has_failed) {
    std::string t = read_file(failed);
    st.note = t.substr(0, t.find('\n'));
  }
  if (status == "finished") st.state = RunState::kFinished;
  else if (status == "diverged") st.state = RunState::kDiverged;
  else if (run_dir_locked(run.dir)) st.state = RunState::kRunning;
  else if (has_failed) st.state = RunState::kFailed;
  else if (any) st.state = RunState::kPartial;
  return st;
}

void write_run_config(const SweepRun& run) {
  fs::create_directories(run.dir);
  write_text_atomic(run.dir + "/config.yaml",
                    str(
                        "# run ", run.name, " (config hash ", run.hash, "), written by `pagegram sweep`\n",
                        [&] {
                          YAML::Emitter e;
                          e << portable_yaml(run.config);
                          return std::string(e.c_str());
                        }(),
                        "\n"));
}

std::string sweep_status_table(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  size_t w = 4;
  for (const auto& r : runs) w = std::max(w, r.name.size());
  std::ostringstream o;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-*s  %-8s  %-9s  %11s  %6s  %9s  %9s\n", int(w), "run", "hash", "state", "step",
                "ckpt", "held-out", "train");
  o << buf;
  std::map<std::string, int> counts;
  double total_s = 0.0;
  for (const auto& r : runs) {
    RunStatus s = run_status(r);
    if ((s.state == RunState::kPending || s.state == RunState::kPartial || s.state == RunState::kFailed) &&
        record_exists(spec, r))
      s = recorded_status(spec, r);  // finished elsewhere (the sweep runner skips it the same way)
    counts[run_state_name(s.state)]++;
    total_s += s.elapsed_s;
    const std::string step = s.state == RunState::kPending ? "-" : str(s.step, "/", s.total_steps);
    const std::string ck = s.checkpoint_step >= 0 ? str(s.checkpoint_step) : "-";
    char loss[32] = "-";
    if (s.final_loss >= 0) std::snprintf(loss, sizeof(loss), "%.4f", s.final_loss);
    std::snprintf(buf, sizeof(buf), "%-*s  %-8s  %-9s  %11s  %6s  %9s  %9s%s\n", int(w), r.name.c_str(), r.hash.c_str(),
                  run_state_name(s.state), step.c_str(), ck.c_str(), loss,
                  s.elapsed_s > 0 ? fmt_duration(s.elapsed_s).c_str() : "-",
                  s.note.empty() ? "" : ("  " + s.note).c_str());
    o << buf;
  }
  // Directories of older configs (any key changed: another hash) are never reused; say that they are there.
  std::set<std::string> mine;
  for (const auto& r : runs) mine.insert(fs::path(r.dir).filename().string());
  std::vector<std::string> stale;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::absolute(spec.out_dir()), ec))
    if (e.is_directory() && !mine.count(e.path().filename().string()) && fs::exists(e.path() / "config.yaml"))
      stale.push_back(e.path().filename().string());
  std::sort(stale.begin(), stale.end());
  if (!stale.empty()) {
    o << stale.size() << " run director" << (stale.size() == 1 ? "y" : "ies")
      << " of other configs (not this sweep's runs, never reused):";
    for (size_t i = 0; i < stale.size() && i < 8; ++i) o << " " << stale[i];
    o << (stale.size() > 8 ? " ..." : "") << "\n";
  }
  o << "sweep " << spec.name() << " (" << fs::absolute(spec.out_dir()).lexically_normal().string() << "): ";
  bool first = true;
  for (const auto& [k, n] : counts) o << (first ? "" : ", ") << n << " " << k, first = false;
  o << "; training time " << fmt_duration(total_s) << "\n";
  return o.str();
}

}  // namespace pg
