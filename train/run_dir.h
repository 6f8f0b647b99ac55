// The run directory of a training run (train.out_dir): what it may hold is checked before any work, and one
// process at a time writes it (docs/robustness.md).
#pragma once
#include <string>

#include "train/config.h"

namespace pg {

// Refuses (UserError, exit 2), before any work, a run directory that this run must not write:
// - train.out_dir is a file, a dangling symlink, or cannot be created or written;
// - checkpoint.h5 or log.h5 there is not a checkpoint / run log of this program, or cannot be read;
// - the directory holds a run of another config (its checkpoint, log or config.yaml), without --force;
// - resume is asked, there is no checkpoint.h5, but log.h5 holds trained steps: a resume never restarts a run
//   (--force starts it over).
// `force` (train --force) allows replacing another config's run and starting over.
void check_run_dir(const ExperimentConfig& cfg, bool resume, bool force);

// One writer per run directory: an advisory lock on <out_dir>/.train.lock held for the whole run (released by
// the kernel when the process dies), with the holder's pid and command in the file for the refusal message.
class RunDirLock {
 public:
  RunDirLock(const std::string& dir, const std::string& command);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace pg
