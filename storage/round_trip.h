// The in-place quantization round trip of a [rows, width] table shared by the row formats (storage/nf4.h,
// storage/mxfp8.h): each row quantized into a scratch row and decoded back, OpenMP-parallel over rows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace pg {

// Returns the first row `quantize` refuses (its values are left as they were), or -1 when every row went through.
template <class Quantize, class Dequantize>
int64_t round_trip_rows(float* table, int64_t rows, int64_t width, int64_t row_bytes, Quantize quantize,
                        Dequantize dequantize) {
  int64_t bad = -1;
#pragma omp parallel if (rows * width > (1 << 16))
  {
    std::vector<uint8_t> buf(static_cast<size_t>(row_bytes));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float* x = table + r * width;
      if (!quantize(x, width, buf.data())) {
#pragma omp critical
        bad = bad < 0 ? r : std::min(bad, r);
        continue;
      }
      dequantize(buf.data(), width, x);
    }
  }
  return bad;
}

}  // namespace pg
