#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/h5.h"
#include "core/output.h"
#include "core/text.h"
#include "train/checkpoint.h"
#include "train/session.h"

namespace pg {

namespace fs = std::filesystem;

namespace {
// The config a run directory's file was written with, or a refusal naming the file.
ExperimentConfig config_of(const std::string& path, const std::string& kind) {
  try {
    if (kind == "pagegram-checkpoint") return checkpoint_config(path);
    if (kind == "pagegram-runlog")
      return parse_experiment(h5::File::open(path).root().attr_string("config"), path + ":/config");
    return parse_experiment(read_file(path), path);
  } catch (const UserError& e) {
    throw UserError(str(path, ": cannot read the run this directory holds (", e.what(),
                        ") (hint: use another train.out_dir, or pass --force to start a new run here)"));
  }
}

int64_t logged_steps(const std::string& log) {
  const h5::File f = h5::File::open(log);
  const h5::Group r = f.root();
  if (!r.has("train")) return 0;
  const h5::Group t = r.sub("train");
  return t.has("step") ? static_cast<int64_t>(t.dataset_shape("step").at(0)) : 0;
}
}  // namespace

void check_run_dir(const ExperimentConfig& cfg, bool resume, bool force) {
  const std::string& dir = cfg.train.out_dir;
  std::error_code ec;
  const fs::file_status lst = fs::symlink_status(dir, ec);
  if (!ec && fs::is_symlink(lst) && !fs::exists(fs::status(dir, ec)))
    throw UserError(str("train.out_dir ", dir,
                        ": a symlink to a missing target (hint: remove the link or choose "
                        "another train.out_dir)"));
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UserError(str("train.out_dir ", dir, ": exists and is not a directory (hint: choose another train.out_dir)"));
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec)
      throw UserError(str("train.out_dir ", dir, ": cannot create the run directory: ", ec.message(),
                          " (hint: check the path and its permissions)"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UserError(str("train.out_dir ", dir, ": not writable (", std::strerror(errno),
                        ") (hint: choose a directory you can write)"));

  {
    const RunDirLock probe(dir, "");  // a live run there is named first (the lock is released at once)
  }
  const std::string ckpt = dir + "/checkpoint.h5", log = dir + "/log.h5", yaml = dir + "/config.yaml";
  const std::string ck = file_kind(ckpt), lk = file_kind(log);
  for (const auto& [path, kind, own] : {std::tuple{ckpt, ck, "pagegram-checkpoint"}, {log, lk, "pagegram-runlog"}})
    if (!kind.empty() && kind != own && !force)
      throw UserError(str(path, ": exists and is not a ",
                          own == std::string("pagegram-checkpoint") ? "checkpoint" : "run log",
                          " of this program (it is ", kind_phrase(kind), ") (hint: use another train.out_dir, or pass ",
                          "--force to replace it)"));
  if (force) return;
  // The run the directory holds: its checkpoint's config, else its log's, else its config.yaml (a sweep writes it
  // before the run starts).
  const std::string holder = !ck.empty() ? ckpt : !lk.empty() ? log : fs::exists(yaml, ec) ? yaml : "";
  if (!holder.empty()) {
    const ExperimentConfig there = config_of(holder, holder == ckpt ? ck : holder == log ? lk : "yaml");
    if (!same_results(there, cfg))
      throw ConfigError(str("train.out_dir ", dir, ": holds a run of another config (", holder,
                            ") (hint: use another train.out_dir, or pass --force to replace that run)"));
  }
  if (resume && ck.empty() && !lk.empty()) {
    const int64_t steps = logged_steps(log);
    if (steps > 0)
      throw UserError(str(dir, ": --resume, but checkpoint.h5 is missing while log.h5 holds ", steps,
                          " trained steps: the run cannot resume (hint: restore checkpoint.h5, or pass --force to "
                          "start the run over, which replaces its log)"));
  }
}

RunDirLock::RunDirLock(const std::string& dir, const std::string& command) {
  const std::string p = dir + "/.train.lock";
  fd_ = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError(str("cannot open ", p, ": ", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder(512, '\0');
    const ssize_t n = ::pread(fd_, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw UserError(str("run directory ", dir, " is in use by another training process (",
                        holder.empty() ? std::string("holder unknown") : holder,
                        ") (hint: wait for it, stop it, or use another train.out_dir)"));
  }
  const std::string me = str("pid ", ::getpid(), ": ", command.empty() ? std::string("pagegram train") : command, "\n");
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    // the lock itself holds; only the message for a second process is missing
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace pg
