// Table sources for inference: where the memory table's rows come from while a model generates (infer/), chosen at
// run time. Every source returns the same thing: fp32 rows [rows, width] for a list of unique row ids.
//
//   ram     the fp32 table in memory (from the checkpoint): no I/O.
//   mmap    the NF4 .pgt file mapped read-only (zLLM's choice); optional page-by-page warm-up at open. A data
//           block's checksum is verified the first time any of its rows is read.
//   direct  the .pgt file through io_uring with O_DIRECT 4 KiB reads and an exact LRU page cache of a configurable
//           size (0 = none), so cold reads really reach the device. Every block read from the device is verified.
//           Where the kernel refuses io_uring (sysctl, a container's seccomp profile, an emulator) or the build has
//           no liburing, or with PAGEGRAM_DIRECT_IO=pread, the same blocks are read by blocking pread one at a
//           time (describe() says which and why); PAGEGRAM_DIRECT_IO=uring makes a missing io_uring an error.
//
// Reads are accounted as the flash simulator counts them (storage/flash_sim.h, docs/model.md §7): each position's rows
// map to 4 KiB blocks (MemoryLayout::block_of; a unit spanning several blocks contributes all), duplicates within a
// position dropped, in head order of first appearance; these accesses run through the LRU in order. Blocks needed
// twice within one fetch (several positions of a prefill, several sessions of a batch) are read once. A corrupt
// block is an IoError naming the file, block and byte offset; never garbage rows.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/config.h"
#include "memory/layout.h"
#include "memory/ngram.h"

namespace pg {

struct TableReadStats {
  int64_t positions = 0;  // token positions looked up
  int64_t rows = 0;  // unique rows returned
  int64_t block_accesses = 0;  // distinct blocks per position, summed (the simulator's accesses)
  int64_t device_reads = 0;  // 4 KiB blocks read from the device (misses; 0 for ram, blocks first touched for mmap)
  int64_t device_bytes = 0;  // bytes the device read for the fetches: direct = device_reads x 4 KiB; mmap = the
                             // fetching thread's read_bytes (page faults and kernel readahead), -1 if unknown
  double io_seconds = 0.0;  // wall time spent reading (waiting for the device, or faulting pages in)
  double reads_per_position() const {
    return positions ? static_cast<double>(device_reads) / static_cast<double>(positions) : 0;
  }
  double bytes_per_position() const {
    return positions ? static_cast<double>(device_bytes) / static_cast<double>(positions) : 0;
  }
};

class TableSource {
 public:
  virtual ~TableSource() = default;
  // "ram", "mmap /path/t.pgt (warm)", "direct /path/t.pgt, cache 1.0 GiB" ...
  virtual std::string describe() const = 0;
  // The rows of addresses `a` (all positions, every head) into out [a.n * a.heads, width] in the order of a.rows
  // (duplicates included), dequantized.
  virtual void fetch(const Addresses& a, float* out) = 0;
  virtual const TableReadStats& stats() const { return stats_; }
  virtual void reset_stats() { stats_ = {}; }

 protected:
  TableReadStats stats_;
};

// The fp32 table [layout.rows(), layout.width()] at `values` (not owned; must outlive the source).
std::unique_ptr<TableSource> ram_table_source(const MemoryLayout& layout, const float* values);
// The .pgt file of `layout` mapped read-only (header, identity and checksum table validated at open).
// warm: read every page once at open (progress on stderr), so lookups never fault.
std::unique_ptr<TableSource> mmap_table_source(const std::string& path, const MemoryLayout& layout, bool warm,
                                               bool progress = false);
// The .pgt file read with O_DIRECT through io_uring (depth reads in flight), with an LRU cache of cache_bytes
// (rounded down to 4 KiB blocks; 0 = none); blocking pread where io_uring is not available (see above).
std::unique_ptr<TableSource> direct_table_source(const std::string& path, const MemoryLayout& layout,
                                                 int64_t cache_bytes, int depth = 64);

// How a command opens a .pgt file: "mmap", "mmap-warm" or "direct" (with an LRU cache of cache_bytes).
struct TableOpenOptions {
  std::string mode = "mmap";
  int64_t cache_bytes = 0;
  bool progress = false;
};
// Opens the table file of a model whose trained table has layout `trained` (built from the memory section `memory`
// and d_model; `pieces`: the tokenizer's, for Engram-faithful hashing). A synthetic file (`pagegram export
// --synthetic-params`: identity info.synthetic_params) holds the trained rows spread over a larger table of the
// same layout (memory/row_spread.h): it is opened with that larger layout and every address is mapped, so reads hit
// the large file where its rows lie. UserError for an unknown mode or a file of another table.
std::unique_ptr<TableSource> open_table_file(const std::string& path, const MemoryLayout& trained,
                                             const MemoryConfig& memory, int64_t d_model,
                                             const std::vector<std::string>& pieces, const TableOpenOptions& o);

}  // namespace pg
