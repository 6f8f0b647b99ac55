// Device benchmark behind `pagegram iobench` (docs/model.md §7, report §8.1, Table 6 / Fig. 4b): table lookups driven
// by a token stream as O_DIRECT 4 KiB reads of a real table file through io_uring, with N reads in flight.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "memory/config.h"
#include "storage/eval_stream.h"
#include "storage/layout_spec.h"

namespace pg {

struct IoBenchResult {
  std::string layout;
  int depth = 0;  // reads in flight
  int64_t lookups = 0;  // tokens whose reads all completed
  int64_t reads = 0;  // 4 KiB reads completed
  double seconds = 0;  // wall time from the first submission to the last completion
  double read_p50_us = 0, read_p99_us = 0;  // submission -> completion of one read
  double lookup_p50_us = 0, lookup_p99_us = 0;  // first read submitted -> last read completed, per token
  double lookups_per_second() const { return seconds > 0 ? static_cast<double>(lookups) / seconds : 0.0; }
  double reads_per_second() const { return seconds > 0 ? static_cast<double>(reads) / seconds : 0.0; }
  // The columns of `pagegram iobench --out` (storage/FORMATS.md), once.
  template <class V>
  static void columns(V& v) {
    v("layouts", &IoBenchResult::layout);
    v("depth", &IoBenchResult::depth);
    v("lookups", &IoBenchResult::lookups);
    v("reads", &IoBenchResult::reads);
    v("seconds", &IoBenchResult::seconds);
    v("lookups_per_second", &IoBenchResult::lookups_per_second);
    v("reads_per_second", &IoBenchResult::reads_per_second);
    v("read_p50_us", &IoBenchResult::read_p50_us);
    v("read_p99_us", &IoBenchResult::read_p99_us);
    v("lookup_p50_us", &IoBenchResult::lookup_p50_us);
    v("lookup_p99_us", &IoBenchResult::lookup_p99_us);
  }
};

// Token t reads blocks[ends[t-1] .. ends[t]) (its distinct 4 KiB blocks, storage/eval_stream.h stream_blocks) at byte
// offset data_offset + 4096 * block of `path`, opened with O_DIRECT. Reads are issued in token order as soon as a
// slot is free (addresses depend only on token ids, so later tokens' reads start before earlier lookups finish),
// keeping `depth` reads in flight. Stops after max_lookups tokens (0 = all) or when max_seconds have passed (then
// in-flight reads are drained; only whole lookups count). Throws IoError when the file cannot be opened with
// O_DIRECT, io_uring is unavailable, or a read fails or comes back short.
IoBenchResult run_iobench(const std::string& path, uint64_t data_offset, const std::vector<uint32_t>& blocks,
                          const std::vector<uint64_t>& ends, int depth, int64_t max_lookups = 0,
                          double max_seconds = 0);

// Report-shaped table: one line per layout, one column group per depth (lookups/s, read p50/p99 µs).
std::string format_iobench_table(const std::vector<IoBenchResult>& r);
void write_iobench_h5(const std::string& path, const std::vector<IoBenchResult>& r,
                      const std::vector<std::pair<std::string, std::string>>& attrs);

// `pagegram iobench` over several layouts: for each, the table file <dir>/<layout>[_s<S>]_<params>.pgt (a valid one is
// reused, else random NF4 content is written), then run_iobench at every depth on the stream's blocks. Files this
// call created are removed at the end (and on an error) unless `keep`; so is `dir` when it made it and it is empty.
struct IoBenchSuiteConfig {
  MemoryConfig memory;  // the config's memory section (layout, slots and target_params replaced per table)
  int64_t d_model = 0;
  const CompressedVocab* vocab = nullptr;  // Engram-faithful hashing (engram_vocab), or none
  std::vector<FlashLayoutSpec> layouts;
  double params = 0;  // table size in parameters
  std::vector<int> depths;
  double seconds = 10;  // time limit per (layout, depth) run (0 = none)
  std::string dir;  // where the table files live
  bool keep = false;
};
struct IoBenchSuiteResult {
  std::vector<IoBenchResult> results;  // layout-major, depths in order
  std::vector<std::string> created;  // table files this call wrote
};
// `log` receives one progress line at a time ("[iobench] ..."); may be empty.
IoBenchSuiteResult run_iobench_suite(const IoBenchSuiteConfig& cfg, const EvalStream& stream,
                                     const std::function<void(const std::string&)>& log = {});

}  // namespace pg
