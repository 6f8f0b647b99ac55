// Implementation of memory/row_spread.h.
#include "memory/row_spread.h"

#include <algorithm>

#include "core/error.h"
#include "core/text.h"

namespace pg {

RowSpread::RowSpread(const MemoryLayout& t, const MemoryLayout& l) : trained_rows_(t.rows()), large_rows_(l.rows()) {
  if (t.name() != l.name() || t.width() != l.width() || t.heads() != l.heads())
    throw UserError(str("synthetic table: a ", t.name(), " table of width ", t.width(), " cannot be placed in a ",
                        l.name(), " table of width ", l.width(), " (hint: the same memory section, another size)"));
  const auto st = t.segments(), sl = l.segments();
  if (st.size() != sl.size())
    throw UserError(str("synthetic table: ", st.size(), " segments vs ", sl.size(), " (hint: same layout and orders)"));
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].unit != sl[i].unit || st[i].rows % st[i].unit || sl[i].rows % sl[i].unit)
      throw UserError(str("synthetic table: segment ", i, " has units of ", st[i].unit, " and ", sl[i].unit,
                          " rows (hint: the same memory.slots and heads)"));
    Seg s{st[i].base, sl[i].base, st[i].rows / st[i].unit, sl[i].rows / sl[i].unit, st[i].unit, 0};
    if (s.units_l < s.units_t)
      throw UserError(str("synthetic table: the large table's segment ", i, " has ", s.units_l,
                          " units, fewer than the "
                          "trained table's ",
                          s.units_t, " (hint: a larger --synthetic-params)"));
    s.stride = s.units_l / s.units_t;
    segs_.push_back(s);
  }
  by_large_.resize(segs_.size());
  for (size_t i = 0; i < by_large_.size(); ++i) by_large_[i] = i;
  std::sort(by_large_.begin(), by_large_.end(), [&](size_t a, size_t b) { return segs_[a].base_l < segs_[b].base_l; });
}

int64_t RowSpread::map(int64_t row) const {
  for (const Seg& s : segs_)
    if (row >= s.base_t && row < s.base_t + s.units_t * s.unit) {
      const int64_t r = row - s.base_t;
      return s.base_l + (r / s.unit) * s.stride * s.unit + r % s.unit;
    }
  PG_CHECK(false, "row ", row, " outside the trained table of ", trained_rows_, " rows");
  return -1;
}

int64_t RowSpread::inverse(int64_t row) const {
  for (size_t i : by_large_) {
    const Seg& s = segs_[i];
    if (row < s.base_l || row >= s.base_l + s.units_l * s.unit) continue;
    const int64_t r = row - s.base_l, u = r / s.unit;
    if (u % s.stride || u / s.stride >= s.units_t) return -1;
    return s.base_t + (u / s.stride) * s.unit + r % s.unit;
  }
  return -1;
}

}  // namespace pg
