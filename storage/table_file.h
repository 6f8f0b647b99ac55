// The page-aligned NF4 table file (.pgt, SPEC §7, storage/FORMATS.md): a header block, the layout identity, one
// checksum per 4 KiB data block, then the data blocks where every row sits where MemoryLayout::block_of puts it
// (a PageGram page never straddles a block). Writer (from any fp32 row source) and validating reader.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "memory/layout.h"

namespace pg {

inline constexpr char kTableFileMagic[8] = {'P', 'G', 'N', 'F', '4', 'T', 'B', 'L'};
inline constexpr uint32_t kTableFileVersion = 1;
inline constexpr int64_t kTableHeaderFields = 128;  // bytes of fixed header fields at the start of block 0

struct TableFileHeader {
  uint32_t version = 0;
  uint32_t block_bytes = 0;
  uint64_t header_blocks = 0;  // blocks before the data (header, identity, checksum table)
  uint64_t data_blocks = 0;
  uint64_t rows = 0, width = 0, row_bytes = 0, params = 0;
  uint64_t identity_offset = 0, identity_bytes = 0, checksum_offset = 0;
  uint64_t identity_hash = 0, checksums_hash = 0;
  std::string identity;              // "key=value\n" lines
  std::vector<uint64_t> checksums;  // [data_blocks] xxh64 of each data block
  uint64_t data_offset() const { return header_blocks * static_cast<uint64_t>(block_bytes); }
  uint64_t file_bytes() const { return (header_blocks + data_blocks) * static_cast<uint64_t>(block_bytes); }
  // The identity value of `key` ("" when absent).
  std::string identity_value(const std::string& key) const;
};

// The identity a file written for `layout` carries and a reader compares (layout name, hash version, hash seed,
// orders, heads, width, rows, sizes, slots / Engram options, derived hash seeds, parameters, quantization).
// Keys starting with "info." (source checkpoint, step, ...) are written but never compared.
std::vector<std::pair<std::string, std::string>> table_identity(const MemoryLayout& layout);

// fp32 values of rows [r0, r0 + n): out [n, width].
using RowSource = std::function<void(int64_t r0, int64_t n, float* out)>;

struct TableWriteOptions {
  std::vector<std::pair<std::string, std::string>> info;  // extra "info.<key>" identity lines (not compared)
  bool progress = false;
};

// Writes the NF4 file of `layout` with values from `rows` (quantized by storage/nf4.h), staged next to `path` and
// renamed into place. Throws UserError naming the first row that cannot be quantized, IoError on I/O failures.
TableFileHeader write_table_file(const std::string& path, const MemoryLayout& layout, const RowSource& rows,
                                 const TableWriteOptions& opt = {});
// The same file structure with random NF4 content (random codes, scales in [0.01, 0.1)): a real table file of any
// size in about the time it takes to write it (iobench), not sparse.
TableFileHeader write_random_table_file(const std::string& path, const MemoryLayout& layout, uint64_t seed,
                                        const TableWriteOptions& opt = {});

// A validated table file. open() checks the magic, version, header checksum, every size against the layout and
// the file length, the identity (key by key against the layout's) and the checksum table's checksum; any failure
// throws IoError "table file <path>: <what> at byte offset <o> (...)". Data blocks are verified when read, or all
// at once by verify_all().
class TableFileReader {
 public:
  static TableFileReader open(const std::string& path, const MemoryLayout& layout);
  // Reads the header and identity only (no layout check): for `pagegram` tools describing a file.
  static TableFileHeader read_header(const std::string& path);
  TableFileReader(TableFileReader&& o) noexcept;
  TableFileReader& operator=(TableFileReader&& o) noexcept;
  TableFileReader(const TableFileReader&) = delete;
  TableFileReader& operator=(const TableFileReader&) = delete;
  ~TableFileReader();

  const TableFileHeader& header() const { return h_; }
  const std::string& path() const { return path_; }
  // Checks every data block's checksum (IoError naming the first bad block and its byte offset).
  void verify_all(bool progress = false) const;
  // Reads data block b (4096 bytes) into out and checks its checksum.
  void read_block(int64_t b, uint8_t* out) const;
  // Row `row` dequantized into out[width]; the blocks it reads are verified.
  void read_row(int64_t row, float* out) const;

 private:
  TableFileReader() = default;
  std::string path_;
  int fd_ = -1;
  const MemoryLayout* layout_ = nullptr;
  TableFileHeader h_;
};

}  // namespace pg
