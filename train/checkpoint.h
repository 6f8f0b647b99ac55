// Checkpoints: one HDF5 file per run (layout in train/FORMATS.md), written atomically.
// Holds every parameter by name with its shape, AdamW moments, step, tokens, sampler counter and the
// resolved config; the reader refuses foreign, truncated or mismatched files with what and where.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/h5.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/config.h"

namespace pg {

inline constexpr int64_t kCheckpointVersion = 1;

struct TrainState {
  int64_t step = 0;  // optimizer steps completed
  int64_t tokens = 0;  // training tokens consumed
  uint64_t sampler_counter = 0;  // data-order stream position
  double elapsed_s = 0.0;  // training wall time so far
};

// Extra sections (the memory table) write into / read from their own group.
using SectionWriter = std::function<void(const h5::Group&)>;
using SectionReader = std::function<void(const h5::Group&)>;

// memory_bytes: about what `memory` writes (a large table's checkpoint goes to disk as it is written,
// h5::File::create).
void save_checkpoint(const std::string& path, const ExperimentConfig& cfg, const Transformer& model, AdamW* opt,
                     const TrainState& st, const SectionWriter& memory = {}, int64_t memory_bytes = 0);
// A table sharded by rows is checkpointed by its owners (Session::save): shard q of R writes
// table_shard_path(path, step, save_id, q, R) ("<dir>/checkpoint.table-<step>-<save_id>-<q>of<R>.h5" for
// ".../checkpoint.h5"), then the checkpoint maps those files (MemoryTable::save). Named by the step and a save id
// drawn for each save, a save never replaces a file another checkpoint maps: the checkpoint's rename commits the
// new shards, and a kill before it leaves the old checkpoint and its shards whole.
std::string table_shard_path(const std::string& checkpoint, int64_t step, const std::string& save_id, int shard,
                             int shards);
// The folder of a checkpoint's shard files: the checkpoint's own folder, or its target's when it is a symlink.
std::string checkpoint_folder(const std::string& checkpoint);
// The shard files a checkpoint maps (full paths; empty for a checkpoint without a sharded table).
std::vector<std::string> checkpoint_shard_files(const std::string& checkpoint);
// Removes the files beside `checkpoint` named as its table shards (table_shard_path, and their temporaries) that are
// not in `keep` (full paths): the shards of earlier saves that no checkpoint kept maps any more. Returns the paths
// removed; never throws.
std::vector<std::string> remove_stale_table_shards(const std::string& checkpoint, const std::vector<std::string>& keep);
// The resolved config stored in a checkpoint (validated).
ExperimentConfig checkpoint_config(const std::string& path);
// Loads parameters (and moments when opt is given) into objects built for `cfg`; shapes must match.
TrainState load_checkpoint(const std::string& path, Transformer& model, AdamW* opt, const SectionReader& memory = {});

}  // namespace pg
