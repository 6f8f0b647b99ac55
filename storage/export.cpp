// Implementation of storage/export.h.
#include "storage/export.h"

#include <algorithm>

#include "core/error.h"
#include "storage/nf4.h"

namespace pg {

TableFileHeader export_table_file(const std::string& path, const MemoryLayout& layout, const float* values,
                                  const std::string& fill, uint64_t seed, const TableWriteOptions& opt) {
  const int64_t w = layout.width();
  if (values)
    return write_table_file(path, layout, [&](int64_t r0, int64_t n, float* dst) {
      std::copy(values + r0 * w, values + (r0 + n) * w, dst);
    }, opt);
  if (fill == "random") return write_random_table_file(path, layout, seed, opt);
  if (fill != "zero") throw UserError(str("export: --fill ", fill, ": expected zero or random"));
  return write_table_file(path, layout, [w](int64_t, int64_t n, float* dst) { std::fill(dst, dst + n * w, 0.0f); }, opt);
}

void verify_table_file(const std::string& path, const MemoryLayout& layout) {
  TableFileReader r = TableFileReader::open(path, layout);
  r.verify_all(true);
}

Nf4LossComparison compare_nf4_loss(std::span<float> values, int64_t rows, int64_t width,
                                   const std::function<double()>& evaluate) {
  Nf4LossComparison c;
  c.fp32 = evaluate();
  nf4::round_trip_table(values.data(), rows, width);  // exactly the values the file holds
  c.nf4 = evaluate();
  return c;
}

}  // namespace pg
