// `pagegram export`'s work that needs no trainer: a table's values (or a zero / random fill) into a .pgt file, and
// the held-out loss with the fp32 table against the same table rounded through NF4. Loading a checkpoint's table
// (train/) stays with the caller: storage/ never includes train/.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "memory/layout.h"
#include "storage/table_file.h"

namespace pg {

// Writes the NF4 file of `layout`: `values` (rows x width fp32, the table as trained) when not null, else zeros
// (fill "zero") or random rows from `seed` (fill "random"). UserError for another fill.
TableFileHeader export_table_file(const std::string& path, const MemoryLayout& layout, const float* values,
                                  const std::string& fill, uint64_t seed, const TableWriteOptions& opt);

// Opens the written file against `layout` and verifies every data block's checksum (IoError naming the block).
void verify_table_file(const std::string& path, const MemoryLayout& layout);

struct Nf4LossComparison {
  double fp32 = 0, nf4 = 0;
  double difference() const { return nf4 - fp32; }
};
// evaluate() with the table as it is, then again after `values` ([rows, width]) are replaced by their NF4 round
// trip, exactly the values the file holds (the table is left quantized).
Nf4LossComparison compare_nf4_loss(std::span<float> values, int64_t rows, int64_t width,
                                   const std::function<double()>& evaluate);

}  // namespace pg
