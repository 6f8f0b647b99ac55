// The page-aligned table file (.pgt, docs/model.md §7, storage/FORMATS.md): a header block, the layout identity, one
// checksum per 4 KiB data block, then the data blocks where every row sits where the table's placement puts it
// (MemoryLayout::block_of for NF4, the same rule with the format's row size otherwise: a PageGram page never
// straddles a block). Rows are quantized as NF4 (storage/nf4.h, the default; version 1 files) or MXFP8
// (storage/mxfp8.h; version 2 files, which name their quantization in the header). Writer (from any fp32 row
// source) and validating reader.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory/layout.h"

namespace pg {

inline constexpr char kTableFileMagic[8] = {'P', 'G', 'N', 'F', '4', 'T', 'B', 'L'};
// Version 1: NF4 rows, header bytes [104, 120) zero (every NF4 file is written as version 1, byte for byte as before
// MXFP8 existed). Version 2: the u32 at byte offset 104 names the quantization (TableQuantization). A reader reads
// both.
inline constexpr uint32_t kTableFileVersionNf4 = 1;
inline constexpr uint32_t kTableFileVersion = 2;  // the newest version this build reads
inline constexpr int64_t kTableHeaderFields = 128;  // bytes of fixed header fields at the start of block 0

// How a file's rows are quantized; the value is the version 2 header's code at byte offset 104.
enum class TableQuantization : uint32_t { kNf4 = 0, kMxfp8 = 1 };
// "nf4", "mxfp8" (the identity's quantization value and `pagegram export --format`).
std::string quantization_name(TableQuantization q);
// The quantization named `name`; UserError naming the known ones otherwise.
TableQuantization parse_quantization(const std::string& name);
// Bytes of one quantized row of `width` values (NF4: 34 per started 64, MXFP8: width + ceil(width / 32)).
int64_t quantized_row_bytes(TableQuantization q, int64_t width);
// In-place round trip of a [rows, width] table through `q`: exactly the values a file of that format holds.
// Throws UserError naming the first row that cannot be quantized.
void round_trip_table(TableQuantization q, float* table, int64_t rows, int64_t width);

// Where a table file puts row r: the unit of placement is a row (flat, Engram-style) or a PageGram page (its K*S
// rows); units of u = unit_rows * row_bytes bytes are packed floor(4096 / u) per block, never across one, and a unit
// larger than 4096 B starts its own block and spans ceil(u / 4096). For NF4 this is MemoryLayout::block_of itself
// (memory/layout.h, the definition the flash simulator, the address dump and iobench use); for another format the
// same rule with that format's row bytes (a test checks that the rule with NF4's row bytes reproduces block_of).
struct TablePlacement {
  const MemoryLayout* layout = nullptr;
  TableQuantization quantization = TableQuantization::kNf4;
  int64_t row_bytes = 0;
  int64_t unit_rows = 1;  // PageGram: K*S; else 1
  BlockLocation block_of(int64_t row) const;
  int64_t num_blocks() const;
};
TablePlacement table_placement(const MemoryLayout& layout, TableQuantization q);
// The placement rule for units of `unit_rows` rows of `row_bytes` bytes.
BlockLocation place_row(int64_t unit_rows, int64_t row_bytes, int64_t row);

struct TableFileHeader {
  uint32_t version = 0;
  TableQuantization quantization = TableQuantization::kNf4;  // version 1: always NF4
  uint32_t block_bytes = 0;
  uint64_t header_blocks = 0;  // blocks before the data (header, identity, checksum table)
  uint64_t data_blocks = 0;
  uint64_t rows = 0, width = 0, row_bytes = 0, params = 0;
  uint64_t identity_offset = 0, identity_bytes = 0, checksum_offset = 0;
  uint64_t identity_hash = 0, checksums_hash = 0;
  std::string identity;  // "key=value\n" lines
  std::vector<uint64_t> checksums;  // [data_blocks] xxh64 of each data block
  uint64_t data_offset() const { return header_blocks * static_cast<uint64_t>(block_bytes); }
  uint64_t file_bytes() const { return (header_blocks + data_blocks) * static_cast<uint64_t>(block_bytes); }
  // The identity value of `key` ("" when absent).
  std::string identity_value(const std::string& key) const;
};

// The identity a file written for `layout` in format `q` carries and a reader compares (layout name, hash version,
// hash seed, orders, heads, width, rows, sizes, slots / Engram options, derived hash seeds, parameters, the number
// of data blocks, quantization and its group layout). Keys starting with "info." (source checkpoint, step, ...) are
// written but never compared. NF4's identity is exactly what version 1 files carry.
std::vector<std::pair<std::string, std::string>> table_identity(const MemoryLayout& layout,
                                                                TableQuantization q = TableQuantization::kNf4);

// fp32 values of rows [r0, r0 + n): out [n, width].
using RowSource = std::function<void(int64_t r0, int64_t n, float* out)>;

struct TableWriteOptions {
  std::vector<std::pair<std::string, std::string>> info;  // extra "info.<key>" identity lines (not compared)
  bool progress = false;
  TableQuantization quantization = TableQuantization::kNf4;  // NF4 (version 1 file) or MXFP8 (version 2)
  // Called after the rows were written, before the identity is: may change the values of `info` (a digest of the
  // rows streamed), keeping every key and every value's length (the file's layout was fixed at the start).
  std::function<void(std::vector<std::pair<std::string, std::string>>& info)> finish_info = nullptr;
};

// Writes the table file of `layout` with values from `rows` quantized as opt.quantization (storage/nf4.h or
// storage/mxfp8.h), staged next to `path` and renamed into place. Throws UserError naming the first row that cannot
// be quantized, IoError on I/O failures.
TableFileHeader write_table_file(const std::string& path, const MemoryLayout& layout, const RowSource& rows,
                                 const TableWriteOptions& opt = {});
// The same file structure with random content (NF4: random codes, scales in [0.01, 0.1); MXFP8: random finite codes,
// scales 2^-15 .. 2^-13): a real table file of any size in about the time it takes to write it (iobench), not sparse.
TableFileHeader write_random_table_file(const std::string& path, const MemoryLayout& layout, uint64_t seed,
                                        const TableWriteOptions& opt = {});

// A validated table file. open() checks the magic, version, header checksum, the quantization (header against
// identity, and against `expect` when given), every size against the layout and the file length, the identity (key by
// key against the layout's in the file's format) and the checksum table's checksum; any failure throws IoError
// "table file <path>: <what> at byte offset <o> (...)". Data blocks are verified when read, or all at once by
// verify_all().
class TableFileReader {
 public:
  static TableFileReader open(const std::string& path, const MemoryLayout& layout,
                              std::optional<TableQuantization> expect = std::nullopt);
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
  // Row `row` dequantized (NF4 or MXFP8, the file's format) into out[width]; the blocks it reads are verified.
  void read_row(int64_t row, float* out) const;

 private:
  TableFileReader() = default;
  std::string path_;
  int fd_ = -1;
  TablePlacement place_;
  TableFileHeader h_;
};

}  // namespace pg
