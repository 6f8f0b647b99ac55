// A trained table's rows placed in a larger table of the same layout (serve a small trained model from a
// full-size file, e.g. a 25M-parameter table from a 20B-parameter .pgt, so that reads hit a device the way a 20B
// table's would). Segment by segment (MemoryLayout::segments), unit u of the trained table goes to unit
// u * stride of the large one, stride = floor(large units / trained units): rows keep their offset within the unit,
// so a PageGram page stays one page (and one 4 KiB block), and the large file's other units are never read. The
// addresses a token reads in the large table are those of the trained table, spread over the large file.
#pragma once
#include <cstdint>
#include <vector>

#include "memory/layout.h"

namespace pg {

class RowSpread {
 public:
  // UserError when the layouts differ (name, segments, unit sizes, width) or `large` has fewer units somewhere.
  RowSpread(const MemoryLayout& trained, const MemoryLayout& large);
  // The large table's row of a trained row.
  int64_t map(int64_t trained_row) const;
  // The trained row placed at `large_row`, or -1 when no trained row is placed there.
  int64_t inverse(int64_t large_row) const;
  int64_t trained_rows() const { return trained_rows_; }
  int64_t large_rows() const { return large_rows_; }

 private:
  struct Seg {
    int64_t base_t, base_l, units_t, units_l, unit, stride;
  };
  std::vector<Seg> segs_;  // in trained-row order
  std::vector<size_t> by_large_;  // segment indices in large-row order
  int64_t trained_rows_ = 0, large_rows_ = 0;
};

}  // namespace pg
