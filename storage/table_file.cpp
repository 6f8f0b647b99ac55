// Implementation of storage/table_file.h.
#include "storage/table_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/progress.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/hash.h"
#include "data/mapped_file.h"
#include "storage/eval_stream.h"
#include "storage/mxfp8.h"
#include "storage/nf4.h"

namespace pg {

static_assert(std::endian::native == std::endian::little, "the table file is little-endian");

namespace {

constexpr uint64_t kBlock = static_cast<uint64_t>(kBlockBytes);
uint64_t ceil_blocks(uint64_t bytes) { return (bytes + kBlock - 1) / kBlock; }

void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Byte offsets of the fixed header fields in block 0.
enum : size_t {
  kOffMagic = 0,
  kOffVersion = 8,
  kOffBlockBytes = 12,
  kOffHeaderBlocks = 16,
  kOffDataBlocks = 24,
  kOffRows = 32,
  kOffWidth = 40,
  kOffRowBytes = 48,
  kOffParams = 56,
  kOffIdentityOffset = 64,
  kOffIdentityBytes = 72,
  kOffChecksumOffset = 80,
  kOffIdentityHash = 88,
  kOffChecksumsHash = 96,
  kOffQuantization = 104,  // version 2: u32 TableQuantization; version 1: zero
  kOffHeaderHash = 120,  // xxh64 of bytes [0, 120)
};

std::string errno_text() { return std::strerror(errno); }

void pwrite_all(int fd, const void* p, size_t n, uint64_t off, const std::string& path) {
  const auto* c = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw ResourceError(str("table file ", path, ": write failed at byte offset ", off, ": ", errno_text(),
                              " (hint: check free disk space)"));
    }
    c += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
}

// Reads exactly n bytes at off; false when the file ends first.
bool pread_all(int fd, void* p, size_t n, uint64_t off, const std::string& path) {
  auto* c = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(str("table file ", path, ": read failed at byte offset ", off, ": ", errno_text()));
    }
    if (r == 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return true;
}

std::string identity_text(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string s;
  for (const auto& [k, v] : kv) s += k + "=" + v + "\n";
  return s;
}

std::vector<std::pair<std::string, std::string>> parse_identity(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string::npos) e = text.size();
    const std::string line = text.substr(p, e - p);
    const size_t eq = line.find('=');
    if (!line.empty()) out.push_back({line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1)});
    p = e + 1;
  }
  return out;
}

// Removes the staged file unless released (an exception left the write unfinished).
struct StagedFile {
  std::string tmp;
  int fd = -1;
  bool done = false;
  ~StagedFile() {
    if (fd >= 0) ::close(fd);
    if (!done && !tmp.empty()) ::unlink(tmp.c_str());
  }
};

// Encodes rows [r0, r0+n) into dst[i] (the format's row bytes each).
using Encoder = std::function<void(int64_t r0, int64_t n, uint8_t* const* dst)>;

TableFileHeader write_core(const std::string& path, const MemoryLayout& layout, const Encoder& encode,
                           const TableWriteOptions& opt) {
  const TablePlacement place = table_placement(layout, opt.quantization);
  TableFileHeader h;
  auto kv = table_identity(layout, opt.quantization);
  for (const auto& [k, v] : opt.info) kv.push_back({"info." + k, v});
  h.identity = identity_text(kv);
  h.quantization = opt.quantization;
  h.version = opt.quantization == TableQuantization::kNf4 ? kTableFileVersionNf4 : kTableFileVersion;
  h.block_bytes = static_cast<uint32_t>(kBlock);
  h.rows = static_cast<uint64_t>(layout.rows());
  h.width = static_cast<uint64_t>(layout.width());
  h.row_bytes = static_cast<uint64_t>(place.row_bytes);
  h.params = h.rows * h.width;
  h.data_blocks = static_cast<uint64_t>(place.num_blocks());
  h.identity_offset = kBlock;
  h.identity_bytes = h.identity.size();
  h.checksum_offset = kBlock * (1 + ceil_blocks(h.identity_bytes));
  h.header_blocks = 1 + ceil_blocks(h.identity_bytes) + ceil_blocks(8 * h.data_blocks);
  h.identity_hash = data::xxh64(h.identity);
  h.checksums.assign(h.data_blocks, 0);

  StagedFile f;
  f.tmp = data::staging_path(path);
  f.fd = ::open(f.tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (f.fd < 0) throw IoError(str("table file ", path, ": cannot create ", f.tmp, ": ", errno_text()));
  // Reserve every byte up front: fails early on a full disk, and the file is never sparse.
  if (const int e = ::posix_fallocate(f.fd, 0, static_cast<off_t>(h.file_bytes())); e != 0 && e != EOPNOTSUPP)
    throw ResourceError(str("table file ", path, ": cannot reserve ", h.file_bytes(), " bytes: ", std::strerror(e),
                            " (hint: check free disk space)"));

  // Data: a window of W blocks starting at data block `flushed`; rows are placed by block_of, which is
  // non-decreasing in the row (checked), so every block below the current row's block is complete.
  constexpr int64_t W = 8192;
  std::vector<uint8_t> win(static_cast<size_t>(W) * kBlock, 0);
  int64_t flushed = 0;
  const uint64_t doff = h.data_offset();
  auto flush_until = [&](int64_t b) {
    const int64_t n = b - flushed;
    if (n <= 0) return;
    PG_CHECK(n <= W);
    pwrite_all(f.fd, win.data(), static_cast<size_t>(n) * kBlock, doff + static_cast<uint64_t>(flushed) * kBlock, path);
    for (int64_t i = 0; i < n; ++i)
      h.checksums[static_cast<size_t>(flushed + i)] = data::xxh64_bytes(win.data() + i * kBlock, kBlock);
    std::memmove(win.data(), win.data() + n * kBlock, static_cast<size_t>(W - n) * kBlock);
    std::memset(win.data() + (W - n) * kBlock, 0, static_cast<size_t>(n) * kBlock);
    flushed = b;
  };
  const int64_t rows = layout.rows(), rb = place.row_bytes;
  const int64_t chunk = std::max<int64_t>(1, W * kBlockBytes / (4 * rb));
  std::vector<uint8_t*> dst(static_cast<size_t>(std::min(chunk, std::max<int64_t>(rows, 1))));
  ProgressLine prog(str("writing ", path, " rows"), rows, opt.progress);
  int64_t last_block = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    flush_until(place.block_of(r0).block);
    for (int64_t i = 0; i < n; ++i) {
      const BlockLocation loc = place.block_of(r0 + i);
      PG_CHECK(loc.block >= last_block, "block_of is not monotonic at row ", r0 + i);
      PG_CHECK(loc.offset >= 0 && loc.offset + rb <= loc.blocks * kBlockBytes, "row ", r0 + i, " overflows its block");
      PG_CHECK(loc.block + loc.blocks - flushed <= W, "table file window too small at row ", r0 + i);
      last_block = loc.block;
      dst[static_cast<size_t>(i)] = win.data() + (loc.block - flushed) * kBlockBytes + loc.offset;
    }
    encode(r0, n, dst.data());
    prog.update(r0 + n);
  }
  flush_until(static_cast<int64_t>(h.data_blocks));
  prog.finish();

  if (opt.finish_info) {  // values known only now, in the space their placeholders reserved
    std::vector<std::pair<std::string, std::string>> info = opt.info;
    opt.finish_info(info);
    PG_CHECK(info.size() == opt.info.size(), "finish_info changed the number of info lines");
    for (size_t i = 0; i < info.size(); ++i)
      PG_CHECK(info[i].first == opt.info[i].first && info[i].second.size() == opt.info[i].second.size(),
               "finish_info changed info.", opt.info[i].first, " beyond its value");
    kv = table_identity(layout, opt.quantization);
    for (const auto& [k, v] : info) kv.push_back({"info." + k, v});
    h.identity = identity_text(kv);
    PG_CHECK(h.identity.size() == h.identity_bytes, "finish_info changed the identity's size");
    h.identity_hash = data::xxh64(h.identity);
  }
  // Identity and checksum table, then the header (last, so an interrupted write has no valid header).
  std::vector<uint8_t> id(ceil_blocks(h.identity_bytes) * kBlock, 0);
  std::memcpy(id.data(), h.identity.data(), h.identity.size());
  pwrite_all(f.fd, id.data(), id.size(), h.identity_offset, path);
  std::vector<uint8_t> cs(ceil_blocks(8 * h.data_blocks) * kBlock, 0);
  std::memcpy(cs.data(), h.checksums.data(), 8 * h.data_blocks);
  h.checksums_hash = data::xxh64_bytes(h.checksums.data(), 8 * h.data_blocks);
  pwrite_all(f.fd, cs.data(), cs.size(), h.checksum_offset, path);
  std::vector<uint8_t> hb(kBlock, 0);
  std::memcpy(hb.data() + kOffMagic, kTableFileMagic, 8);
  put32(hb.data() + kOffVersion, h.version);
  put32(hb.data() + kOffBlockBytes, h.block_bytes);
  put64(hb.data() + kOffHeaderBlocks, h.header_blocks);
  put64(hb.data() + kOffDataBlocks, h.data_blocks);
  put64(hb.data() + kOffRows, h.rows);
  put64(hb.data() + kOffWidth, h.width);
  put64(hb.data() + kOffRowBytes, h.row_bytes);
  put64(hb.data() + kOffParams, h.params);
  put64(hb.data() + kOffIdentityOffset, h.identity_offset);
  put64(hb.data() + kOffIdentityBytes, h.identity_bytes);
  put64(hb.data() + kOffChecksumOffset, h.checksum_offset);
  put64(hb.data() + kOffIdentityHash, h.identity_hash);
  put64(hb.data() + kOffChecksumsHash, h.checksums_hash);
  if (h.version >= 2) put32(hb.data() + kOffQuantization, static_cast<uint32_t>(h.quantization));
  put64(hb.data() + kOffHeaderHash, data::xxh64_bytes(hb.data(), kOffHeaderHash));
  pwrite_all(f.fd, hb.data(), hb.size(), 0, path);
  if (::fsync(f.fd) != 0) throw ResourceError(str("table file ", path, ": fsync failed: ", errno_text()));
  ::close(f.fd);
  f.fd = -1;
  if (::rename(f.tmp.c_str(), path.c_str()) != 0)
    throw ResourceError(str("table file ", path, ": cannot rename ", f.tmp, " into place: ", errno_text()));
  f.done = true;
  return h;
}

}  // namespace

std::string quantization_name(TableQuantization q) {
  switch (q) {
    case TableQuantization::kNf4:
      return "nf4";
    case TableQuantization::kMxfp8:
      return "mxfp8";
  }
  return str("unknown(", static_cast<uint32_t>(q), ")");
}

TableQuantization parse_quantization(const std::string& name) {
  if (name == "nf4") return TableQuantization::kNf4;
  if (name == "mxfp8") return TableQuantization::kMxfp8;
  throw UserError(str("table quantization '", name, "': expected nf4 or mxfp8"));
}

int64_t quantized_row_bytes(TableQuantization q, int64_t width) {
  return q == TableQuantization::kMxfp8 ? mxfp8::row_bytes(width) : nf4::row_bytes(width);
}

void round_trip_table(TableQuantization q, float* table, int64_t rows, int64_t width) {
  if (q == TableQuantization::kMxfp8) mxfp8::round_trip_table(table, rows, width);
  else nf4::round_trip_table(table, rows, width);
}

BlockLocation place_row(int64_t unit_rows, int64_t row_bytes, int64_t row) {
  const int64_t unit = row / unit_rows, in_unit = row % unit_rows, ub = unit_rows * row_bytes;
  BlockLocation b;
  if (ub <= kBlockBytes) {
    const int64_t per_block = kBlockBytes / ub;
    b.block = unit / per_block;
    b.offset = (unit % per_block) * ub + in_unit * row_bytes;
  } else {
    b.blocks = (ub + kBlockBytes - 1) / kBlockBytes;
    b.block = unit * b.blocks;
    b.offset = in_unit * row_bytes;  // may exceed 4096: the unit spans b.blocks blocks
  }
  return b;
}

TablePlacement table_placement(const MemoryLayout& layout, TableQuantization q) {
  TablePlacement p;
  p.layout = &layout;
  p.quantization = q;
  p.row_bytes = quantized_row_bytes(q, layout.width());
  p.unit_rows = layout.unit_rows();
  return p;
}

BlockLocation TablePlacement::block_of(int64_t row) const {
  if (quantization == TableQuantization::kNf4) return layout->block_of(row);
  return place_row(unit_rows, row_bytes, row);
}

int64_t TablePlacement::num_blocks() const {
  if (quantization == TableQuantization::kNf4) return layout->num_blocks();
  if (layout->rows() == 0) return 0;
  const BlockLocation last = block_of(layout->rows() - 1);
  return last.block + last.blocks;
}

std::string TableFileHeader::identity_value(const std::string& key) const {
  for (const auto& [k, v] : parse_identity(identity))
    if (k == key) return v;
  return "";
}

std::vector<std::pair<std::string, std::string>> table_identity(const MemoryLayout& layout, TableQuantization q) {
  auto kv = layout.identity();
  std::string seeds;
  for (uint64_t s : layout.derived_seeds()) seeds += (seeds.empty() ? "" : ",") + std::to_string(s);
  kv.push_back({"derived_seeds", seeds});
  kv.push_back({"params", std::to_string(layout.params())});
  kv.push_back({"num_blocks", std::to_string(table_placement(layout, q).num_blocks())});
  kv.push_back({"quantization", quantization_name(q)});
  if (q == TableQuantization::kMxfp8)
    kv.push_back({"mxfp8_block",
                  "32 values: E8M0 scale byte 2^(floor(log2 absmax) - 8) + 32 E4M3 code bytes "
                  "(OCP MX v1.0, round to nearest even, saturating)"});
  else
    kv.push_back({"nf4_group", "64 values: fp16 absmax (rounded up) + 32 code bytes, even element in the high nibble"});
  return kv;
}

TableFileHeader write_table_file(const std::string& path, const MemoryLayout& layout, const RowSource& rows,
                                 const TableWriteOptions& opt) {
  const int64_t w = layout.width();
  const bool mx = opt.quantization == TableQuantization::kMxfp8;
  std::vector<float> buf;
  return write_core(
      path, layout,
      [&](int64_t r0, int64_t n, uint8_t* const* dst) {
        buf.resize(static_cast<size_t>(n * w));
        rows(r0, n, buf.data());
        int64_t bad = -1;
#pragma omp parallel for schedule(static) if (n * w > (1 << 16))
        for (int64_t i = 0; i < n; ++i) {
          const bool ok = mx ? mxfp8::quantize_row(buf.data() + i * w, w, dst[i])
                             : nf4::quantize_row(buf.data() + i * w, w, dst[i]);
          if (!ok) {
#pragma omp critical
            bad = bad < 0 ? r0 + i : std::min(bad, r0 + i);
          }
        }
        if (bad >= 0)
          throw UserError(str("table file ", path, ": row ", bad,
                              mx ? " holds a value that is not finite; not written"
                                 : " holds a value that is not finite or beyond the fp16 range (65504); not written"));
      },
      opt);
}

TableFileHeader write_random_table_file(const std::string& path, const MemoryLayout& layout, uint64_t seed,
                                        const TableWriteOptions& opt) {
  const RngStream rng(seed, "eval.random_table");
  if (opt.quantization == TableQuantization::kMxfp8) {
    const int64_t w = layout.width(), blocks = (w + mxfp8::kBlock - 1) / mxfp8::kBlock;
    return write_core(
        path, layout,
        [&](int64_t r0, int64_t n, uint8_t* const* dst) {
#pragma omp parallel for schedule(static) if (n > 4096)
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t k = 0; k < blocks; ++k) {
              uint8_t* o = dst[i] + k * (mxfp8::kBlock + 1);
              const int64_t len = std::min(mxfp8::kBlock, w - k * mxfp8::kBlock);
              const uint64_t base = static_cast<uint64_t>((r0 + i) * blocks + k) * 5;
              o[0] = static_cast<uint8_t>(112 + rng.at(base) % 3);  // 2^-15 .. 2^-13
              for (int64_t j = 0; j < len; ++j) {
                uint8_t c = static_cast<uint8_t>(rng.at(base + 1 + static_cast<uint64_t>(j / 8)) >> (8 * (j % 8)));
                if ((c & 0x7F) == 0x7F) c ^= 1;  // no NaN codes: 0x7F -> 0x7E (+448)
                o[1 + j] = c;
              }
            }
          }
        },
        opt);
  }
  const int64_t groups = (layout.width() + nf4::kGroup - 1) / nf4::kGroup;
  return write_core(
      path, layout,
      [&](int64_t r0, int64_t n, uint8_t* const* dst) {
#pragma omp parallel for schedule(static) if (n > 4096)
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t g = 0; g < groups; ++g) {
            uint8_t* o = dst[i] + g * nf4::kGroupBytes;
            const uint64_t base = static_cast<uint64_t>((r0 + i) * groups + g) * 5;
            const double u = static_cast<double>(rng.at(base) >> 11) * 0x1.0p-53;
            const uint16_t s = nf4::float_to_half(static_cast<float>(0.01 + 0.09 * u));
            o[0] = static_cast<uint8_t>(s & 0xFF);
            o[1] = static_cast<uint8_t>(s >> 8);
            for (int64_t j = 0; j < 4; ++j) {
              const uint64_t v = rng.at(base + 1 + static_cast<uint64_t>(j));
              std::memcpy(o + 2 + 8 * j, &v, 8);
            }
          }
        }
      },
      opt);
}

// ---- Reader.

namespace {
[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw IoError(str("table file ", path, ": ", what));
}
}  // namespace

TableFileHeader TableFileReader::read_header(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad_file(path, str("cannot open: ", errno_text()));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) bad_file(path, str("cannot stat: ", errno_text()));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint8_t b[kTableHeaderFields];
  if (size < static_cast<uint64_t>(kTableHeaderFields) || !pread_all(fd, b, sizeof b, 0, path))
    bad_file(path, str("truncated: ", size, " bytes, shorter than the ", kTableHeaderFields,
                       "-byte header at byte offset 0"));
  if (std::memcmp(b, kTableFileMagic, 8) != 0)
    bad_file(path, "not a PageGram table file (magic at byte offset 0 is not \"PGNF4TBL\")");
  TableFileHeader h;
  h.version = get32(b + kOffVersion);
  if (h.version != kTableFileVersionNf4 && h.version != kTableFileVersion)
    bad_file(path, str("format version ", h.version, " at byte offset ", kOffVersion, "; this build reads versions ",
                       kTableFileVersionNf4, " and ", kTableFileVersion));
  if (get64(b + kOffHeaderHash) != data::xxh64_bytes(b, kOffHeaderHash))
    bad_file(path, str("header checksum mismatch at byte offset ", kOffHeaderHash, " (the header is corrupted)"));
  if (h.version >= 2) {
    const uint32_t q = get32(b + kOffQuantization);
    if (q != static_cast<uint32_t>(TableQuantization::kNf4) && q != static_cast<uint32_t>(TableQuantization::kMxfp8))
      bad_file(path, str("unknown quantization code ", q, " at byte offset ", kOffQuantization,
                         " (known: 0 = nf4, 1 = mxfp8)"));
    h.quantization = static_cast<TableQuantization>(q);
  }
  h.block_bytes = get32(b + kOffBlockBytes);
  h.header_blocks = get64(b + kOffHeaderBlocks);
  h.data_blocks = get64(b + kOffDataBlocks);
  h.rows = get64(b + kOffRows);
  h.width = get64(b + kOffWidth);
  h.row_bytes = get64(b + kOffRowBytes);
  h.params = get64(b + kOffParams);
  h.identity_offset = get64(b + kOffIdentityOffset);
  h.identity_bytes = get64(b + kOffIdentityBytes);
  h.checksum_offset = get64(b + kOffChecksumOffset);
  h.identity_hash = get64(b + kOffIdentityHash);
  h.checksums_hash = get64(b + kOffChecksumsHash);
  // Internal consistency of the fixed fields (the header hash passed: these only fail for a foreign writer).
  if (h.block_bytes != kBlock)
    bad_file(path, str("block size ", h.block_bytes, " at byte offset ", kOffBlockBytes, ", expected 4096"));
  if (h.row_bytes != static_cast<uint64_t>(quantized_row_bytes(h.quantization, static_cast<int64_t>(h.width))) ||
      h.params != h.rows * h.width || h.identity_offset != kBlock ||
      h.checksum_offset != kBlock * (1 + ceil_blocks(h.identity_bytes)) ||
      h.header_blocks != 1 + ceil_blocks(h.identity_bytes) + ceil_blocks(8 * h.data_blocks) ||
      h.data_blocks > (1ULL << 40))
    bad_file(path, "inconsistent header fields in bytes [0, 120) (not written by this format's writer)");
  if (size != h.file_bytes()) {
    if (size < h.file_bytes()) {
      const uint64_t first_missing = size < h.data_offset() ? 0 : (size - h.data_offset()) / kBlock;
      bad_file(path, str("truncated: ", size, " bytes, the header describes ", h.file_bytes(), " (",
                         size < h.data_offset() ? str("the header region ends at byte offset ", h.data_offset())
                                                : str("data block ", first_missing, " at byte offset ",
                                                      h.data_offset() + first_missing * kBlock, " is incomplete"),
                         ")"));
    }
    bad_file(path, str("has ", size, " bytes, more than the ", h.file_bytes(),
                       " its header describes (trailing data at byte offset ", h.file_bytes(), ")"));
  }
  h.identity.resize(h.identity_bytes);
  if (!pread_all(fd, h.identity.data(), h.identity_bytes, h.identity_offset, path))
    bad_file(path, str("truncated identity at byte offset ", h.identity_offset));
  if (data::xxh64(h.identity) != h.identity_hash)
    bad_file(path, str("identity checksum mismatch at byte offset ", h.identity_offset, " (corrupted)"));
  if (const std::string q = h.identity_value("quantization"); q != quantization_name(h.quantization))
    bad_file(path,
             str("the identity at byte offset ", h.identity_offset, " says quantization=", q, ", the header (version ",
                 h.version, ") ", quantization_name(h.quantization), " (not written by this format's writer)"));
  h.checksums.resize(h.data_blocks);
  if (!pread_all(fd, h.checksums.data(), 8 * h.data_blocks, h.checksum_offset, path))
    bad_file(path, str("truncated checksum table at byte offset ", h.checksum_offset));
  if (data::xxh64_bytes(h.checksums.data(), 8 * h.data_blocks) != h.checksums_hash)
    bad_file(path, str("checksum table corrupted (its checksum does not match) at byte offset ", h.checksum_offset));
  return h;
}

TableFileReader TableFileReader::open(const std::string& path, const MemoryLayout& layout,
                                      std::optional<TableQuantization> expect) {
  TableFileReader r;
  r.path_ = path;
  r.h_ = read_header(path);
  if (expect && *expect != r.h_.quantization)
    bad_file(path, str("quantization is ", quantization_name(r.h_.quantization),
                       r.h_.version >= 2 ? str(" (header byte offset ", kOffQuantization, ")")
                                         : std::string(" (a version 1 file)"),
                       ", expected ", quantization_name(*expect)));
  r.place_ = table_placement(layout, r.h_.quantization);
  // Identity: every non-info key must be present with the same value, and no other non-info key.
  const auto want = table_identity(layout, r.h_.quantization);
  const auto have = parse_identity(r.h_.identity);
  std::map<std::string, std::string> hv;
  for (const auto& [k, v] : have) hv[k] = v;
  for (const auto& [k, v] : want) {
    auto it = hv.find(k);
    if (it == hv.end())
      bad_file(path, str("layout mismatch: identity key '", k, "' missing from the file (expected '", v, "')"));
    if (it->second != v)
      bad_file(path,
               str("layout mismatch: identity key '", k, "' is '", it->second, "' in the file, '", v,
                   "' for the requested layout (hint: the file was written for another layout, size or hash seed)"));
  }
  for (const auto& [k, v] : have)
    if (k.rfind("info.", 0) != 0 && std::none_of(want.begin(), want.end(), [&](const auto& p) { return p.first == k; }))
      bad_file(path,
               str("layout mismatch: the file has identity key '", k, "' (='", v, "') the requested layout lacks"));
  if (r.h_.rows != static_cast<uint64_t>(layout.rows()) || r.h_.width != static_cast<uint64_t>(layout.width()) ||
      r.h_.data_blocks != static_cast<uint64_t>(r.place_.num_blocks()))
    bad_file(path, str("layout mismatch: header has ", r.h_.rows, " rows x ", r.h_.width, " in ", r.h_.data_blocks,
                       " blocks, the layout ", layout.rows(), " x ", layout.width(), " in ", r.place_.num_blocks()));
  r.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.fd_ < 0) bad_file(path, str("cannot open: ", errno_text()));
  return r;
}

TableFileReader::TableFileReader(TableFileReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), place_(o.place_), h_(std::move(o.h_)) {
  o.fd_ = -1;
}
TableFileReader& TableFileReader::operator=(TableFileReader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    place_ = o.place_;
    h_ = std::move(o.h_);
    o.fd_ = -1;
  }
  return *this;
}
TableFileReader::~TableFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void TableFileReader::read_block(int64_t b, uint8_t* out) const {
  if (b < 0 || static_cast<uint64_t>(b) >= h_.data_blocks)
    throw UserError(str("table file ", path_, ": block ", b, " outside its ", h_.data_blocks, " data blocks"));
  const uint64_t off = h_.data_offset() + static_cast<uint64_t>(b) * kBlock;
  if (!pread_all(fd_, out, kBlock, off, path_))
    bad_file(path_, str("truncated: data block ", b, " at byte offset ", off));
  if (data::xxh64_bytes(out, kBlock) != h_.checksums[static_cast<size_t>(b)])
    bad_file(path_, str("data block ", b, " at byte offset ", off, ": checksum mismatch (corrupted)"));
}

void TableFileReader::verify_all(bool progress) const {
  constexpr uint64_t kChunk = 2048;
  std::vector<uint8_t> buf(kChunk * kBlock);
  ProgressLine prog(str("verifying ", path_, " blocks"), static_cast<int64_t>(h_.data_blocks), progress);
  for (uint64_t b0 = 0; b0 < h_.data_blocks; b0 += kChunk) {
    const uint64_t n = std::min(kChunk, h_.data_blocks - b0);
    const uint64_t off = h_.data_offset() + b0 * kBlock;
    if (!pread_all(fd_, buf.data(), n * kBlock, off, path_))
      bad_file(path_, str("truncated: data blocks from ", b0, " at byte offset ", off));
    for (uint64_t i = 0; i < n; ++i)
      if (data::xxh64_bytes(buf.data() + i * kBlock, kBlock) != h_.checksums[b0 + i])
        bad_file(path_,
                 str("data block ", b0 + i, " at byte offset ", off + i * kBlock, ": checksum mismatch (corrupted)"));
    prog.update(static_cast<int64_t>(b0 + n));
  }
  prog.finish();
}

void TableFileReader::read_row(int64_t row, float* out) const {
  if (row < 0 || static_cast<uint64_t>(row) >= h_.rows)
    throw UserError(str("table file ", path_, ": row ", row, " outside its ", h_.rows, " rows"));
  const BlockLocation loc = place_.block_of(row);
  std::vector<uint8_t> buf(static_cast<size_t>(loc.blocks) * kBlock);
  for (int64_t i = 0; i < loc.blocks; ++i) read_block(loc.block + i, buf.data() + i * kBlockBytes);
  if (h_.quantization == TableQuantization::kMxfp8)
    mxfp8::dequantize_row(buf.data() + loc.offset, static_cast<int64_t>(h_.width), out);
  else nf4::dequantize_row(buf.data() + loc.offset, static_cast<int64_t>(h_.width), out);
}

}  // namespace pg
