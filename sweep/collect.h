// Merging finished runs from other machines' directories into a sweep's out_dir, by name and config hash.
#pragma once
#include <string>
#include <vector>

#include "sweep/spec.h"

namespace pg {

struct CollectResult {
  std::vector<std::string> merged;  // "<name>: from <dir>"
  std::vector<std::string> had;  // already finished here
  std::vector<std::string> missing;  // finished nowhere
  std::vector<std::string> refused;  // "<dir>: why" (same name but another config, unfinished, ...)
};
// For each run not finished locally, copies a finished directory named <name>-<hash> from one of `from` (or
// from a sweep out_dir below it) whose log's config hashes to the same value; never one with another hash.
CollectResult collect_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                            const std::vector<std::string>& from);

}  // namespace pg
