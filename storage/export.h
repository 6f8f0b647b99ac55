// `pagegram export`'s work that needs no trainer: a table's values (or a zero / random fill) into a .pgt file (NF4 or
// MXFP8), and the held-out loss with the fp32 table against the same table rounded through each format. Loading a
// checkpoint's table (train/) stays with the caller: storage/ never includes train/.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memory/layout.h"
#include "storage/table_file.h"

namespace pg {

// Writes the table file of `layout` in opt.quantization: `values` (rows x width fp32, the table as trained) when not
// null, else zeros (fill "zero") or random rows from `seed` (fill "random"). UserError for another fill.
TableFileHeader export_table_file(const std::string& path, const MemoryLayout& layout, const float* values,
                                  const std::string& fill, uint64_t seed, const TableWriteOptions& opt);

// Opens the written file against `layout` (and `expect`, its quantization, when given) and verifies every data
// block's checksum (IoError naming the block).
void verify_table_file(const std::string& path, const MemoryLayout& layout,
                       std::optional<TableQuantization> expect = std::nullopt);

struct TableLossComparison {
  double fp32 = 0;
  std::vector<std::pair<TableQuantization, double>> quantized;  // in the order asked for
  // The loss with the table rounded through q (an internal error when q was not measured).
  double loss(TableQuantization q) const;
  double difference(TableQuantization q) const { return loss(q) - fp32; }
};
// evaluate() with the table as it is, then once per format with `values` ([rows, width]) replaced by that format's
// round trip of the fp32 values (exactly the values its file holds); `values` is restored to fp32 afterwards (also
// when evaluate() or a round trip throws).
TableLossComparison compare_table_loss(std::span<float> values, int64_t rows, int64_t width,
                                       const std::vector<TableQuantization>& formats,
                                       const std::function<double()>& evaluate);

// The line `pagegram export --eval-windows` prints: "held-out over N windows: fp32 table F nats, NF4 table Q nats,
// difference +D (report: +0.0004), MXFP8 table M nats, MXFP8 - fp32 +E (T s)". The NF4 part is the line versions
// before MXFP8 printed (experiments/nf4_runs.sh reads "fp32 table", "NF4 table" and the one "difference").
std::string format_loss_comparison(const TableLossComparison& c, int64_t windows, double seconds);

}  // namespace pg
