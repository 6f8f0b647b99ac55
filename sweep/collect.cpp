// Implementation of sweep/collect.h.
#include "sweep/collect.h"

#include <unistd.h>

#include <filesystem>

#include "core/h5.h"
#include "sweep/status.h"

namespace pg {

namespace fs = std::filesystem;

namespace {
// The config hash of the config stored in a run directory's log.h5 ("" when it cannot be read).
std::string logged_config_hash(const std::string& dir, std::string* why) {
  try {
    h5::File f = h5::File::open(dir + "/log.h5");
    return config_hash(parse_experiment(f.root().attr_string("config"), dir + "/log.h5"));
  } catch (const UserError& e) {
    *why = e.what();
    return "";
  }
}
}  // namespace

CollectResult collect_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                            const std::vector<std::string>& from) {
  CollectResult res;
  for (const auto& src : from)
    if (!fs::is_directory(src)) throw IoError(str("sweep collect: --from ", src, ": not a directory"));
  for (const auto& r : runs) {
    if (run_dir_finished(r.dir)) {
      res.had.push_back(r.name);
      continue;
    }
    if (run_dir_locked(r.dir)) {
      res.refused.push_back(str(r.dir, ": a runner on this machine is running it"));
      continue;
    }
    const std::string leaf = fs::path(r.dir).filename().string();
    bool done = false;
    for (const auto& src : from) {
      // The directory itself, a sweep out_dir holding it, or a runs/ tree holding sweep out_dirs.
      std::vector<fs::path> cand{fs::path(src) / leaf, fs::path(src) / spec.name() / leaf};
      if (fs::path(src).filename() == leaf) cand.insert(cand.begin(), fs::path(src));
      for (const auto& c : cand) {
        if (done || !fs::is_directory(c)) continue;
        if (fs::weakly_canonical(c) == fs::weakly_canonical(r.dir)) continue;  // our own directory
        if (!run_dir_finished(c.string())) {
          res.refused.push_back(str(c.string(), ": not finished"));
          continue;
        }
        std::string why;
        const std::string h = logged_config_hash(c.string(), &why);
        if (h != r.hash) {
          res.refused.push_back(str(c.string(), ": its log's config hashes to ", h.empty() ? "?" : h, " not ", r.hash,
                                    why.empty() ? "" : " (" + why + ")"));
          continue;
        }
        // Copy into a temp directory next to the target, then swap it in.
        const fs::path tmp = fs::path(r.dir + ".collect-" + std::to_string(::getpid()));
        fs::remove_all(tmp);
        fs::create_directories(tmp);
        for (const auto& e : fs::directory_iterator(c))
          if (e.is_regular_file() && e.path().filename() != ".lock")
            fs::copy_file(e.path(), tmp / e.path().filename(), fs::copy_options::overwrite_existing);
        fs::remove_all(r.dir);
        fs::rename(tmp, r.dir);
        write_run_config(r);  // train.out_dir = this machine's directory
        res.merged.push_back(str(r.name, ": from ", c.string()));
        done = true;
      }
      if (done) break;
    }
    if (!done) res.missing.push_back(r.name);
  }
  return res;
}

}  // namespace pg
