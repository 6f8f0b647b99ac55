// Implementation of storage/table_source.h.
#include "storage/table_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/progress.h"
#include "core/error.h"
#include "core/text.h"
#include "core/sysinfo.h"
#include "core/timer.h"
#include "data/hash.h"
#include "storage/eval_stream.h"
#include "storage/mxfp8.h"
#include "storage/nf4.h"
#include "storage/layout_spec.h"
#include "storage/table_file.h"
#include "memory/row_spread.h"

#ifdef PG_HAVE_URING
#include <liburing.h>
#endif

namespace pg {
namespace {

constexpr int64_t kBlock = 4096;

// Row decoding of a table file's quantization.
using RowDecoder = void (*)(const uint8_t* in, int64_t width, float* out);
RowDecoder decoder_of(const TableFileHeader& h) {
  return h.quantization == TableQuantization::kMxfp8 ? mxfp8::dequantize_row : nf4::dequantize_row;
}

// The accesses of one fetch, as the simulator counts them: per position, the distinct blocks of its rows in head
// order of first appearance. Also the unique rows of the whole fetch (sorted) and each entry's index among them.
struct FetchPlan {
  std::vector<uint32_t> accesses;  // block ids, position by position
  std::vector<int64_t> unique_rows;  // sorted
  std::vector<int32_t> entry_row;  // [a.n * heads]: index into unique_rows
  void build(const TablePlacement& place, const Addresses& a, bool blocks) {
    const int64_t E = a.n * a.heads;
    unique_rows.assign(a.rows.begin(), a.rows.begin() + E);
    std::sort(unique_rows.begin(), unique_rows.end());
    unique_rows.erase(std::unique(unique_rows.begin(), unique_rows.end()), unique_rows.end());
    entry_row.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e)
      entry_row[static_cast<size_t>(e)] = static_cast<int32_t>(
          std::lower_bound(unique_rows.begin(), unique_rows.end(), a.rows[static_cast<size_t>(e)]) -
          unique_rows.begin());
    accesses.clear();
    if (!blocks) return;
    for (int64_t i = 0; i < a.n; ++i) {
      const size_t first = accesses.size();
      for (int64_t h = 0; h < a.heads; ++h) {
        const BlockLocation loc = place.block_of(a.row_ptr(i)[h]);
        for (int64_t k = 0; k < loc.blocks; ++k) {
          const uint32_t b = static_cast<uint32_t>(loc.block + k);
          if (std::find(accesses.begin() + static_cast<std::ptrdiff_t>(first), accesses.end(), b) == accesses.end())
            accesses.push_back(b);
        }
      }
    }
  }
  // out [E, width] from the decoded unique rows [unique, width].
  void scatter(const float* decoded, int64_t width, float* out) const {
    for (size_t e = 0; e < entry_row.size(); ++e)
      std::memcpy(out + static_cast<int64_t>(e) * width, decoded + static_cast<int64_t>(entry_row[e]) * width,
                  static_cast<size_t>(width) * sizeof(float));
  }
};

// ---------------------------------------------------------------- ram
class RamSource final : public TableSource {
 public:
  RamSource(const MemoryLayout& layout, const float* values) : layout_(layout), values_(values) {}
  std::string describe() const override { return "ram (fp32 table from the checkpoint)"; }
  void fetch(const Addresses& a, float* out) override {
    const int64_t W = layout_.width(), E = a.n * a.heads;
    for (int64_t e = 0; e < E; ++e)
      std::memcpy(out + e * W, values_ + a.rows[static_cast<size_t>(e)] * W, static_cast<size_t>(W) * sizeof(float));
    stats_.positions += a.n;
    stats_.rows += E;
  }

 private:
  const MemoryLayout& layout_;
  const float* values_;
};

// ---------------------------------------------------------------- mmap
class MmapSource final : public TableSource {
 public:
  MmapSource(const std::string& path, const MemoryLayout& layout, bool warm, bool progress)
      : path_(path), layout_(layout), warm_(warm) {
    TableFileReader r = TableFileReader::open(path, layout);  // validates everything but the data blocks
    h_ = r.header();
    decode_ = decoder_of(h_);
    place_ = table_placement(layout, h_.quantization);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(str("table file ", path, ": cannot open: ", std::strerror(errno)));
    bytes_ = h_.file_bytes();
    void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED)
      throw IoError(str("table file ", path, ": mmap of ", bytes_, " bytes failed: ", std::strerror(err)));
    base_ = static_cast<const uint8_t*>(p);
    data_ = base_ + h_.data_offset();
    verified_.assign(h_.data_blocks, 0);
    // Cold: a token's rows are a few scattered 4 KiB blocks; without this the kernel's readahead reads up to
    // megabytes around each fault (zLLM sets it too). Warm: the whole file is read once, in order.
    ::madvise(const_cast<uint8_t*>(base_), bytes_, warm ? MADV_SEQUENTIAL : MADV_RANDOM);
    if (warm) {
      const Timer t;
      ProgressLine line(str("warming ", path, " (blocks)"), static_cast<int64_t>(h_.data_blocks), progress);
      volatile uint8_t sink = 0;
      for (uint64_t b = 0; b < h_.data_blocks; ++b) {
        sink = sink + data_[b * kBlock];
        if ((b & 4095) == 0) line.update(static_cast<int64_t>(b));
      }
      line.finish();
      warm_seconds_ = t.seconds();
      ::madvise(const_cast<uint8_t*>(base_), bytes_, MADV_RANDOM);  // warm now; later faults (after eviction) small
    }
  }
  ~MmapSource() override { ::munmap(const_cast<uint8_t*>(base_), bytes_); }
  std::string describe() const override {
    return str("mmap ", path_, " (", quantization_name(h_.quantization), ")",
               warm_ ? str(" (warmed in ", warm_seconds_, " s)") : std::string(" (cold, page faults)"));
  }
  void fetch(const Addresses& a, float* out) override {
    const int64_t W = layout_.width();
    plan_.build(place_, a, true);
    const Timer t;
    const int64_t io0 = thread_read_bytes();
    prefetch_first_reads();
    for (uint32_t b : plan_.accesses) {
      ++stats_.block_accesses;
      if (verified_[b]) continue;
      if (data::xxh64_bytes(data_ + static_cast<uint64_t>(b) * kBlock, kBlock) != h_.checksums[b])
        throw IoError(str("table file ", path_, ": data block ", b, " at byte offset ", h_.data_offset() + b * kBlock,
                          ": checksum mismatch (corrupted) (hint: re-export the table)"));
      verified_[b] = 1;
      ++stats_.device_reads;
    }
    decoded_.resize(plan_.unique_rows.size() * static_cast<size_t>(W));
    for (size_t u = 0; u < plan_.unique_rows.size(); ++u) {
      const BlockLocation loc = place_.block_of(plan_.unique_rows[u]);
      decode_(data_ + static_cast<uint64_t>(loc.block) * kBlock + static_cast<uint64_t>(loc.offset), W,
              decoded_.data() + static_cast<int64_t>(u) * W);
    }
    stats_.io_seconds += t.seconds();
    const int64_t io1 = thread_read_bytes();
    if (io0 < 0 || io1 < 0 || stats_.device_bytes < 0) stats_.device_bytes = -1;
    else stats_.device_bytes += io1 - io0;
    plan_.scatter(decoded_.data(), W, out);
    stats_.positions += a.n;
    stats_.rows += static_cast<int64_t>(plan_.unique_rows.size());
  }

 private:
  // The blocks this fetch reads for the first time, asked for all at once (MADV_WILLNEED per run of consecutive
  // blocks): the kernel starts their reads together, and the faults of the checksum loop then wait for reads in
  // flight instead of issuing them one at a time (a cold Engram-style step wants ~16 blocks per token). Blocks
  // already read once are not advised (a syscall each, for pages almost always still cached).
  void prefetch_first_reads() {
    if (warm_) return;
    cold_.clear();
    for (uint32_t b : plan_.accesses)
      if (!verified_[b]) cold_.push_back(b);
    if (cold_.size() < 2) return;  // one fault reads it as soon
    std::sort(cold_.begin(), cold_.end());
    cold_.erase(std::unique(cold_.begin(), cold_.end()), cold_.end());
    for (size_t i = 0; i < cold_.size();) {
      size_t j = i + 1;
      while (j < cold_.size() && cold_[j] == cold_[j - 1] + 1) ++j;
      // data blocks are 4 KiB-aligned in the file and the mapping starts page-aligned
      ::madvise(const_cast<uint8_t*>(data_ + static_cast<uint64_t>(cold_[i]) * kBlock), (j - i) * kBlock,
                MADV_WILLNEED);
      i = j;
    }
  }

  std::string path_;
  const MemoryLayout& layout_;
  bool warm_;
  double warm_seconds_ = 0;
  std::vector<uint32_t> cold_;
  TableFileHeader h_;
  TablePlacement place_;
  RowDecoder decode_ = nullptr;
  const uint8_t* base_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<uint8_t> verified_;
  FetchPlan plan_;
  std::vector<float> decoded_;
};

// ---------------------------------------------------------------- direct (io_uring, O_DIRECT, LRU)
// Exact LRU over block ids with one 4 KiB buffer per slot: a hash map block -> slot and a doubly linked list of
// slots, most recent first. Capacity 0: no cache.
class BlockLru {
 public:
  explicit BlockLru(int64_t capacity) : cap_(capacity), prev_(capacity), next_(capacity), block_(capacity) {}
  int64_t capacity() const { return cap_; }
  void clear() {
    map_.clear();
    head_ = tail_ = -1;
  }
  // The slot of a cached block (made most recent), or -1.
  int64_t touch(uint32_t b) {
    auto it = map_.find(b);
    if (it == map_.end()) return -1;
    unlink(it->second);
    push_front(it->second);
    return it->second;
  }
  // Inserts a block (not cached) as most recent, evicting the least recent when full; returns its slot.
  int64_t insert(uint32_t b) {
    int64_t s;
    if (static_cast<int64_t>(map_.size()) < cap_) {
      s = static_cast<int64_t>(map_.size());
    } else {
      s = tail_;
      unlink(s);
      map_.erase(block_[static_cast<size_t>(s)]);
    }
    block_[static_cast<size_t>(s)] = b;
    map_[b] = s;
    push_front(s);
    return s;
  }

 private:
  void unlink(int64_t s) {
    const int64_t p = prev_[static_cast<size_t>(s)], n = next_[static_cast<size_t>(s)];
    (p >= 0 ? next_[static_cast<size_t>(p)] : head_) = n;
    (n >= 0 ? prev_[static_cast<size_t>(n)] : tail_) = p;
  }
  void push_front(int64_t s) {
    prev_[static_cast<size_t>(s)] = -1;
    next_[static_cast<size_t>(s)] = head_;
    if (head_ >= 0) prev_[static_cast<size_t>(head_)] = s;
    head_ = s;
    if (tail_ < 0) tail_ = s;
  }
  int64_t cap_, head_ = -1, tail_ = -1;
  std::vector<int64_t> prev_, next_;
  std::vector<uint32_t> block_;
  std::unordered_map<uint32_t, int64_t> map_;
};

struct AlignedBuffer {
  uint8_t* p = nullptr;
  explicit AlignedBuffer(size_t bytes) {
    if (bytes > 0) {
      p = static_cast<uint8_t*>(std::aligned_alloc(kBlock, (bytes + kBlock - 1) / kBlock * kBlock));
      if (!p) throw ResourceError(str("cannot allocate ", bytes, " bytes of page cache (hint: a smaller --cache)"));
    }
  }
  ~AlignedBuffer() { std::free(p); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

class DirectSource final : public TableSource {
 public:
  DirectSource(const std::string& path, const MemoryLayout& layout, int64_t cache_bytes, int depth)
      : path_(path),
        layout_(layout),
        depth_(depth),
        lru_(cache_bytes / kBlock),
        cache_(static_cast<size_t>(cache_bytes / kBlock * kBlock)) {
    if (depth < 1 || depth > 4096)
      throw UserError(str("table source direct: reads in flight must be in [1, 4096], got ", depth));
    TableFileReader r = TableFileReader::open(path, layout);
    h_ = r.header();
    decode_ = decoder_of(h_);
    place_ = table_placement(layout, h_.quantization);
    fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd_ < 0)
      throw IoError(str("table file ", path, ": cannot open with O_DIRECT: ", std::strerror(errno),
                        " (hint: tmpfs does not support O_DIRECT; put the table on a disk)"));
    // io_uring, unless this build has none, PAGEGRAM_DIRECT_IO=pread asks for the fallback, or the kernel refuses a
    // ring (disabled by sysctl, a container's seccomp profile, an emulator): then blocking pread, one block at a
    // time. Same blocks, same verification, same rows; only the reads are not overlapped.
    const char* io = std::getenv("PAGEGRAM_DIRECT_IO");
    const std::string want = io ? io : "auto";
    if (want != "auto" && want != "uring" && want != "pread") {
      ::close(fd_);
      throw UserError(str("PAGEGRAM_DIRECT_IO=", want, ": unknown (hint: auto, uring or pread)"));
    }
#ifdef PG_HAVE_URING
    if (want != "pread") {
      if (const int e = io_uring_queue_init(static_cast<unsigned>(depth), &ring_, 0); e < 0) {
        if (want == "uring") {
          ::close(fd_);
          throw IoError(str("table source direct: io_uring_queue_init(", depth, ") failed: ", std::strerror(-e),
                            " (hint: io_uring may be disabled: /proc/sys/kernel/io_uring_disabled; "
                            "PAGEGRAM_DIRECT_IO=auto falls back to pread)"));
        }
        no_uring_ = str("io_uring unavailable: ", std::strerror(-e));
      } else {
        uring_ = true;
      }
    } else {
      no_uring_ = "PAGEGRAM_DIRECT_IO=pread";
    }
#else
    if (want == "uring") {
      ::close(fd_);
      throw UserError(
          "table source direct: this build has no io_uring (hint: install liburing-dev and re-run cmake, "
          "or PAGEGRAM_DIRECT_IO=auto for pread)");
    }
    no_uring_ = "this build has no io_uring";
#endif
  }
  ~DirectSource() override {
#ifdef PG_HAVE_URING
    if (uring_) io_uring_queue_exit(&ring_);
#endif
    if (fd_ >= 0) ::close(fd_);
  }
  std::string describe() const override {
    return str("direct ", path_, " (", quantization_name(h_.quantization), ", O_DIRECT, ",
               uring_ ? str("io_uring depth ", depth_) : str("pread, one read at a time (", no_uring_, ")"),
               ", LRU cache ", lru_.capacity() == 0 ? std::string("none") : format_bytes(lru_.capacity() * kBlock),
               ")");
  }

  void fetch(const Addresses& a, float* out) override {
    const int64_t W = layout_.width();
    plan_.build(place_, a, true);
    // Where each distinct block of this fetch lives: a cache slot, or a per-fetch buffer (no cache, or more
    // distinct blocks than the cache holds). Misses are read in one batch below.
    local_.clear();
    reads_.clear();
    const bool cached = lru_.capacity() > 0;
    std::unordered_map<uint32_t, int64_t> where_fetch;  // block -> fetch buffer index (uncached)
    bool overflow = false;
    if (cached) {
      // the distinct blocks of this fetch must fit in the cache at once; otherwise it bypasses the cache
      std::vector<uint32_t> d(plan_.accesses);
      std::sort(d.begin(), d.end());
      overflow = static_cast<int64_t>(std::unique(d.begin(), d.end()) - d.begin()) > lru_.capacity();
    }
    for (uint32_t b : plan_.accesses) {
      ++stats_.block_accesses;
      if (cached && !overflow) {
        if (const int64_t hit = lru_.touch(b); hit >= 0) {
          local_[b] = cache_.p + hit * kBlock;
          continue;
        }
        const int64_t s = lru_.insert(b);
        reads_.push_back({b, cache_.p + s * kBlock});
        local_[b] = cache_.p + s * kBlock;
      } else {
        if (where_fetch.count(b)) continue;
        where_fetch[b] = static_cast<int64_t>(where_fetch.size());
      }
    }
    if (!where_fetch.empty()) {
      if (static_cast<int64_t>(fetch_bytes_) < static_cast<int64_t>(where_fetch.size()) * kBlock) {
        fetch_mem_ = std::make_unique<AlignedBuffer>(where_fetch.size() * kBlock * 2);
        fetch_bytes_ = where_fetch.size() * kBlock * 2;
      }
      for (auto& [b, i] : where_fetch) {
        reads_.push_back({b, fetch_mem_->p + i * kBlock});
        local_[b] = fetch_mem_->p + i * kBlock;
      }
    }
    const Timer t;
    read_all();
    stats_.io_seconds += t.seconds();
    stats_.device_reads += static_cast<int64_t>(reads_.size());
    stats_.device_bytes += static_cast<int64_t>(reads_.size()) * static_cast<int64_t>(kBlock);  // O_DIRECT: exact
    // Decode each unique row from its blocks (a row spanning blocks is copied together first).
    decoded_.resize(plan_.unique_rows.size() * static_cast<size_t>(W));
    std::vector<uint8_t> span_buf;
    for (size_t u = 0; u < plan_.unique_rows.size(); ++u) {
      const BlockLocation loc = place_.block_of(plan_.unique_rows[u]);
      const uint8_t* src;
      if (loc.blocks == 1) {
        src = block_ptr(static_cast<uint32_t>(loc.block)) + loc.offset;
      } else {
        span_buf.resize(static_cast<size_t>(loc.blocks * kBlock));
        for (int64_t k = 0; k < loc.blocks; ++k)
          std::memcpy(span_buf.data() + k * kBlock, block_ptr(static_cast<uint32_t>(loc.block + k)), kBlock);
        src = span_buf.data() + loc.offset;
      }
      decode_(src, W, decoded_.data() + static_cast<int64_t>(u) * W);
    }
    plan_.scatter(decoded_.data(), W, out);
    stats_.positions += a.n;
    stats_.rows += static_cast<int64_t>(plan_.unique_rows.size());
  }

 private:
  struct Read {
    uint32_t block;
    uint8_t* dst;
  };
  const uint8_t* block_ptr(uint32_t b) {
    auto it = local_.find(b);
    PG_CHECK(it != local_.end(), "block ", b, " neither read nor cached");
    return it->second;
  }
  // Reads every block of reads_ and verifies it. On a failed or corrupt read, the reads still in flight are waited
  // for (the kernel writes into their buffers until they complete) and the cache is emptied (its slots of this fetch
  // hold no verified data) before the error is thrown.
  void read_all() {
    std::string error;
    if (uring_) read_uring(error);
    else read_pread(error);
    if (!error.empty()) {
      lru_.clear();
      throw IoError(error);
    }
  }
  // The error of a completed read of r (res bytes or -errno), or "" when it is whole and verified.
  std::string check_read(const Read& r, int64_t res) const {
    const uint64_t off = h_.data_offset() + static_cast<uint64_t>(r.block) * kBlock;
    if (res != kBlock)
      return str("table file ", path_, ": read of data block ", r.block, " at byte offset ", off, " returned ",
                 res < 0 ? std::string(std::strerror(static_cast<int>(-res))) : str(res, " bytes"));
    if (data::xxh64_bytes(r.dst, kBlock) != h_.checksums[r.block])
      return str("table file ", path_, ": data block ", r.block, " at byte offset ", off,
                 ": checksum mismatch (corrupted) (hint: re-export the table)");
    return "";
  }
  void read_pread(std::string& error) {
    for (const Read& r : reads_) {
      const off_t off = static_cast<off_t>(h_.data_offset() + static_cast<uint64_t>(r.block) * kBlock);
      ssize_t n;
      do n = ::pread(fd_, r.dst, kBlock, off);
      while (n < 0 && errno == EINTR);
      error = check_read(r, n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n));
      if (!error.empty()) return;
    }
  }
  void read_uring(std::string& error) {
#ifdef PG_HAVE_URING
    size_t next = 0, reaped = 0;
    int inflight = 0;
    while (reaped < next || (error.empty() && next < reads_.size())) {
      while (error.empty() && next < reads_.size() && inflight < depth_) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (!sqe) break;
        const Read& r = reads_[next];
        io_uring_prep_read(sqe, fd_, r.dst, kBlock, h_.data_offset() + static_cast<uint64_t>(r.block) * kBlock);
        io_uring_sqe_set_data64(sqe, next);
        ++next;
        ++inflight;
      }
      const int e = io_uring_submit_and_wait(&ring_, 1);
      if (e < 0 && e != -EINTR) {
        if (error.empty()) error = str("table file ", path_, ": io_uring submit failed: ", std::strerror(-e));
        if (inflight == 0) break;
        continue;
      }
      io_uring_cqe* cqe = nullptr;
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        ++reaped;
        --inflight;
        if (!error.empty()) continue;
        error = check_read(reads_[io_uring_cqe_get_data64(cqe)], cqe->res);
      }
      io_uring_cq_advance(&ring_, seen);
    }
#else
    (void)error;
#endif
  }

  std::string path_;
  const MemoryLayout& layout_;
  int depth_;
  TableFileHeader h_;
  TablePlacement place_;
  RowDecoder decode_ = nullptr;
  int fd_ = -1;
  bool uring_ = false;  // reads through ring_; else pread
  std::string no_uring_;  // why not (describe())
#ifdef PG_HAVE_URING
  io_uring ring_{};
#endif
  BlockLru lru_;
  AlignedBuffer cache_;
  std::unique_ptr<AlignedBuffer> fetch_mem_;
  size_t fetch_bytes_ = 0;
  std::unordered_map<uint32_t, uint8_t*> local_;
  std::vector<Read> reads_;
  FetchPlan plan_;
  std::vector<float> decoded_;
};

}  // namespace

std::unique_ptr<TableSource> ram_table_source(const MemoryLayout& layout, const float* values) {
  return std::make_unique<RamSource>(layout, values);
}
std::unique_ptr<TableSource> mmap_table_source(const std::string& path, const MemoryLayout& layout, bool warm,
                                               bool progress) {
  return std::make_unique<MmapSource>(path, layout, warm, progress);
}
std::unique_ptr<TableSource> direct_table_source(const std::string& path, const MemoryLayout& layout,
                                                 int64_t cache_bytes, int depth) {
  if (cache_bytes < 0)
    throw UserError(str("table source direct: cache of ", cache_bytes, " bytes (hint: 0 = no cache)"));
  return std::make_unique<DirectSource>(path, layout, cache_bytes, depth);
}

namespace {
// The trained table's addresses mapped into a larger file's rows (memory/row_spread.h); reads are the inner
// source's (so they are counted on the large file's blocks).
class SpreadSource final : public TableSource {
 public:
  SpreadSource(std::unique_ptr<MemoryLayout> large, const MemoryLayout& trained, const std::string& path,
               const TableOpenOptions& o)
      : large_(std::move(large)), spread_(trained, *large_) {
    inner_ = o.mode == "direct" ? direct_table_source(path, *large_, o.cache_bytes)
                                : mmap_table_source(path, *large_, o.mode == "mmap-warm", o.progress);
  }
  std::string describe() const override {
    return str(inner_->describe(), ", synthetic: ", format_count(static_cast<double>(large_->params())),
               " parameters holding the trained rows");
  }
  void fetch(const Addresses& a, float* out) override {
    mapped_.n = a.n;
    mapped_.heads = a.heads;
    mapped_.sign_words = a.sign_words;
    mapped_.rows.resize(a.rows.size());
    for (size_t i = 0; i < a.rows.size(); ++i) mapped_.rows[i] = spread_.map(a.rows[i]);
    // Sources read rows only (the signs are applied by the caller), so the signs are not copied.
    inner_->fetch(mapped_, out);
  }
  const TableReadStats& stats() const override { return inner_->stats(); }
  void reset_stats() override { inner_->reset_stats(); }

 private:
  std::unique_ptr<MemoryLayout> large_;
  RowSpread spread_;
  std::unique_ptr<TableSource> inner_;
  Addresses mapped_;
};
}  // namespace

std::unique_ptr<TableSource> open_table_file(const std::string& path, const MemoryLayout& trained,
                                             const MemoryConfig& memory, int64_t d_model,
                                             const std::vector<std::string>& pieces, const TableOpenOptions& o) {
  if (o.mode != "mmap" && o.mode != "mmap-warm" && o.mode != "direct")
    throw UserError(str("--table-mode ", o.mode, ": expected mmap, mmap-warm or direct"));
  const TableFileHeader h = TableFileReader::read_header(path);
  const std::string synthetic = h.identity_value("info.synthetic_params");
  if (synthetic.empty()) {
    if (o.mode == "direct") return direct_table_source(path, trained, o.cache_bytes);
    return mmap_table_source(path, trained, o.mode == "mmap-warm", o.progress);
  }
  const double params = parse_count(synthetic, str(path, ": info.synthetic_params"));
  auto large = make_storage_layout(memory, d_model, FlashLayoutSpec{trained.name(), 0}, params, pieces);
  return std::make_unique<SpreadSource>(std::move(large), trained, path, o);
}

}  // namespace pg
