// Implementation of storage/export.h.
#include "storage/export.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace pg {

TableFileHeader export_table_file(const std::string& path, const MemoryLayout& layout, const float* values,
                                  const std::string& fill, uint64_t seed, const TableWriteOptions& opt) {
  const int64_t w = layout.width();
  if (values)
    return write_table_file(
        path, layout,
        [&](int64_t r0, int64_t n, float* dst) { std::copy(values + r0 * w, values + (r0 + n) * w, dst); }, opt);
  if (fill == "random") return write_random_table_file(path, layout, seed, opt);
  if (fill != "zero") throw UserError(str("export: --fill ", fill, ": expected zero or random"));
  return write_table_file(
      path, layout, [w](int64_t, int64_t n, float* dst) { std::fill(dst, dst + n * w, 0.0f); }, opt);
}

void verify_table_file(const std::string& path, const MemoryLayout& layout, std::optional<TableQuantization> expect) {
  TableFileReader r = TableFileReader::open(path, layout, expect);
  r.verify_all(true);
}

double TableLossComparison::loss(TableQuantization q) const {
  for (const auto& [f, l] : quantized)
    if (f == q) return l;
  PG_CHECK(false, "no held-out loss measured for ", quantization_name(q));
  return 0;
}

TableLossComparison compare_table_loss(std::span<float> values, int64_t rows, int64_t width,
                                       const std::vector<TableQuantization>& formats,
                                       const std::function<double()>& evaluate) {
  PG_CHECK(static_cast<int64_t>(values.size()) == rows * width, "table of ", values.size(), " values is not ", rows,
           " x ", width);
  TableLossComparison c;
  c.fp32 = evaluate();
  const std::vector<float> fp32(values.begin(), values.end());
  struct Restore {
    std::span<float> v;
    const std::vector<float>& f;
    ~Restore() { std::copy(f.begin(), f.end(), v.begin()); }
  } restore{values, fp32};
  for (const TableQuantization q : formats) {
    std::copy(fp32.begin(), fp32.end(), values.begin());
    round_trip_table(q, values.data(), rows, width);  // exactly the values the file holds
    c.quantized.push_back({q, evaluate()});
  }
  return c;
}

std::string format_loss_comparison(const TableLossComparison& c, int64_t windows, double seconds) {
  char buf[128];
  std::string s = str("held-out over ", windows, " windows: ");
  std::snprintf(buf, sizeof buf, "fp32 table %.6f nats", c.fp32);
  s += buf;
  for (const auto& [q, l] : c.quantized) {
    if (q == TableQuantization::kNf4) {
      std::snprintf(buf, sizeof buf, ", NF4 table %.6f nats, difference %+.6f (report: +0.0004)", l, l - c.fp32);
    } else {
      std::snprintf(buf, sizeof buf, ", MXFP8 table %.6f nats, MXFP8 - fp32 %+.6f", l, l - c.fp32);
    }
    s += buf;
  }
  std::snprintf(buf, sizeof buf, " (%.1f s)", seconds);
  return s + buf;
}

}  // namespace pg
