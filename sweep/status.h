// The state of a sweep's run directories (pending / partial / running / finished / diverged / failed), read from
// their log.h5, checkpoint.h5, failed.txt and lock, the resolved config.yaml of a run, and the status table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace pg {

enum class RunState { kPending, kPartial, kRunning, kFinished, kDiverged, kFailed };
const char* run_state_name(RunState s);

struct RunStatus {
  RunState state = RunState::kPending;
  int64_t step = 0;  // last logged optimizer step
  int64_t total_steps = 0;  // of the resolved config
  int64_t checkpoint_step = -1;  // step of checkpoint.h5 (-1: none)
  double final_loss = -1.0;  // last held-out loss in the log (-1: none)
  double elapsed_s = 0.0;  // training wall time in the log
  std::string note;  // failure reason (from <dir>/failed.txt)
};
// Reads <dir>/log.h5 (atomically replaced by the trainer, so safe to read while it runs), checkpoint.h5's step,
// failed.txt and the runner's lock (a run locked by a live runner is kRunning).
RunStatus run_status(const SweepRun& run);
// True when <dir>/log.h5 exists and says status=finished.
bool run_dir_finished(const std::string& dir);

// True when a live runner holds <dir>/.lock (flock is released when its holder dies).
bool run_dir_locked(const std::string& dir);
// Writes <dir>/config.yaml (the resolved config, train.out_dir = dir) atomically.
void write_run_config(const SweepRun& run);

// The status table (one line per run: state, steps, checkpoint, final held-out loss, training time).
std::string sweep_status_table(const SweepSpec& spec, const std::vector<SweepRun>& runs);

}  // namespace pg
