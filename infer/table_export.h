// `pagegram export`: a trained checkpoint's memory table (or a config's zero / random table) written as the
// page-aligned .pgt file generation serves from (storage/FORMATS.md), read back and verified, and optionally the
// held-out loss with the fp32 table beside the same table rounded through NF4 and MXFP8. The file format and the
// comparison are storage/'s (storage/export.h); loading the checkpoint needs the trainer's session, hence this room.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/export.h"
#include "storage/table_file.h"

namespace pg {

class MemoryTable;

// The identity of a trained table: XXH64 of its fp32 values (decay replayed, as exported), 16 hex digits. An export
// of a checkpoint records it in the file (identity line info.table_xxh64); generate and serve compare it with the
// checkpoint they load and refuse a table file exported from another checkpoint.
std::string table_fingerprint(const MemoryTable& table);
// The same of the table saved in `checkpoint`, streamed from it slab by slab (MemoryTable::read_saved_rows): `table`
// (its layout and optimizer settings; it may hold no rows) need not hold the saved rows, nor the process the table.
std::string saved_table_fingerprint(const std::string& checkpoint, const MemoryTable& table);
// Refuses (UserError) a table file whose info.table_xxh64 differs from `fingerprint` (files without it, written
// before the field or from a config, are accepted and said so by the caller's description).
void check_table_fingerprint(const std::string& table_path, const std::string& checkpoint,
                             const std::string& fingerprint);

struct TableExportOptions {
  std::string checkpoint;  // a checkpoint.h5 with a memory table, or
  std::string config;  // a config whose layout gets a `fill` table
  std::vector<std::string> sets;  // --set overrides of `config`
  std::string fill = "zero";  // with `config`: zero or random
  TableQuantization quantization = TableQuantization::kNf4;
  int64_t eval_windows = 0;  // with `checkpoint`: compare held-out loss on this many validation windows
  bool verify = true;  // read every block of the written file back
  std::vector<std::pair<std::string, std::string>> info;  // extra header info (revision, command)
  double synthetic_params = 0;  // with `checkpoint`: write a table of this many parameters (same layout) holding
                                // the trained rows spread over it (memory/row_spread.h), zeros elsewhere
};

struct TableExportResult {
  TableFileHeader header;
  std::string layout_report;  // the layout's parity line (rows, heads, blocks)
  double write_seconds = 0, verify_seconds = 0;
  std::optional<TableLossComparison> loss;  // when eval_windows > 0
  int64_t eval_windows = 0;  // windows actually evaluated (at most the validation set)
  double eval_seconds = 0;
};

// Writes `out`. UserError for bad options (both or neither source, a checkpoint without a table, eval windows
// without a checkpoint), IoError / ResourceError from reading and writing files.
TableExportResult export_table(const TableExportOptions& opt, const std::string& out);

}  // namespace pg
