// FlashCacheSimulator: an exact LRU page cache over 4 KiB block ids (docs/model.md §7, report §8, Table 6, Fig. 4a),
// and the sweep behind `pagegram flashsim`: flash reads per token per (layout, table size, cache size).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memory/config.h"
#include "storage/eval_stream.h"
#include "storage/layout_spec.h"

namespace pg {

// Exact LRU over block ids [0, universe) holding at most `capacity` blocks. An access to a cached block is a
// hit and makes it the most recent; any other access is a miss (a flash read) that inserts the block, evicting
// the least recent one when full. Capacity 0 = no cache: every access is a miss.
//
// Structure (no linked list, no hashing): an access log and, per block, the log index of its latest access
// (kNone when not cached). The cached blocks are exactly those with a live latest access; `lru_` is the log index
// of the least recent cached block, and only moves forward: an eviction clears that block and advances lru_ to
// the next live entry (an entry s is live iff last_[log_[s]] == s). The log is compacted to its live entries when
// full (amortized O(1)). Each access is one random read-modify-write of last_[] plus, on evictions, a forward scan
// whose addresses are known ahead, so both are software-prefetched. Memory: 4 bytes per block of the table plus
// 4 bytes per log entry (2 * capacity + log_slack entries).
class FlashCacheSimulator {
 public:
  // log_slack: log entries beyond 2 * capacity (tests make it small to exercise compaction).
  FlashCacheSimulator(int64_t universe, int64_t capacity, int64_t log_slack = int64_t{1} << 20);
  // Runs `blocks` through the cache in order; returns the misses among them.
  int64_t access(std::span<const uint32_t> blocks);
  int64_t accesses() const { return accesses_; }
  int64_t misses() const { return misses_; }
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  int64_t universe() const { return universe_; }
  bool contains(uint32_t block) const;
  // Cached blocks, most recent first (for tests).
  std::vector<uint32_t> mru_order() const;
  // Empties the cache and zeroes the counters.
  void reset();
  // Block ids are 32-bit; this one means "none", so a table has fewer blocks.
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

 private:
  void compact();
  int64_t universe_, capacity_;
  int64_t size_ = 0, accesses_ = 0, misses_ = 0;
  std::vector<uint32_t> last_;  // [universe]: log index of the block's latest access, kNone if not cached
  std::vector<uint32_t> log_;  // accessed blocks in order since the last compaction (capacity log_cap_)
  int64_t log_size_ = 0, log_cap_ = 0;
  int64_t lru_ = 0;  // log index of the least recent cached block (== log_size_ when the cache is empty)
};

struct FlashSweepConfig {
  // orders, heads, head_dim, hash seed (layout, slots and target_params are set per table). Engram-style tables use
  // the standard per-head hashes (not the Engram-faithful option): reads per token depend on the hash only
  // through its uniformity.
  MemoryConfig memory;
  int64_t d_model = 384;
  std::vector<FlashLayoutSpec> layouts;
  std::vector<double> sizes = {3.2e9, 10e9, 20e9};  // table parameters (4-bit NF4 on flash)
  std::vector<int64_t> caches = {0, int64_t{256} << 20, int64_t{1} << 30, int64_t{4} << 30};  // bytes
  int64_t chunk_tokens = 1 << 16;
  bool progress = true;
};

struct FlashResult {
  std::string layout;  // label()
  int64_t slots = 0;
  double target_params = 0;
  int64_t params = 0;  // the layout's actual parameters (parity)
  int64_t num_blocks = 0;  // 4 KiB blocks of the NF4 file's data region
  int64_t cache_bytes = 0;
  int64_t cache_blocks = 0;  // cache_bytes / 4096
  int64_t tokens = 0;
  int64_t accesses = 0;  // distinct blocks per token, summed
  int64_t misses = 0;  // flash reads
  double lru_seconds = 0;  // thread CPU time spent in the cache simulation of this row
  double reads_per_token() const { return tokens ? static_cast<double>(misses) / static_cast<double>(tokens) : 0.0; }
  // The columns of `pagegram flashsim --out` (storage/FORMATS.md), once.
  template <class V>
  static void columns(V& v) {
    v("layouts", &FlashResult::layout);
    v("slots", &FlashResult::slots);
    v("target_params", &FlashResult::target_params);
    v("params", &FlashResult::params);
    v("num_blocks", &FlashResult::num_blocks);
    v("cache_bytes", &FlashResult::cache_bytes);
    v("cache_blocks", &FlashResult::cache_blocks);
    v("tokens", &FlashResult::tokens);
    v("accesses", &FlashResult::accesses);
    v("misses", &FlashResult::misses);
    v("reads_per_token", &FlashResult::reads_per_token);
  }
};

struct FlashSweepSummary {
  std::vector<FlashResult> results;  // (layout, size, cache) in the config's order
  int64_t lru_accesses = 0;  // accesses simulated with a cache (capacity > 0)
  double lru_seconds = 0;  // thread CPU time spent in those simulations
  double wall_seconds = 0;
  int threads = 1;
  double accesses_per_second_per_core() const {
    return lru_seconds > 0 ? static_cast<double>(lru_accesses) / lru_seconds : 0.0;
  }
};

// Streams the tokens through every (layout, size) table, computing each token's blocks once and feeding all cache
// sizes. Tables are described by their parameter count only (block ids come from MemoryLayout::block_of; nothing is
// materialized). Parallel over (layout, size) tables; each table's result is independent of the thread count.
FlashSweepSummary run_flash_sweep(const FlashSweepConfig& cfg, const EvalStream& stream);

// The report's Table 6 shape: one line per (table size, cache), one column per layout, reads per token.
std::string format_flash_table(const FlashSweepSummary& s);
// Writes the results as one row per (layout, size, cache) in columns under `/flashsim` (see storage/FORMATS.md),
// with `attrs` as string attributes of the root (command, config, stream).
void write_flash_h5(const std::string& path, const FlashSweepSummary& s,
                    const std::vector<std::pair<std::string, std::string>>& attrs);

}  // namespace pg
