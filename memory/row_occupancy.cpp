// Implementation of memory/row_occupancy.h.
#include "memory/row_occupancy.h"

#include "core/error.h"

namespace pg {

RowOccupancy::RowOccupancy(const MemoryLayout& layout)
    : layout_(layout), first_(static_cast<size_t>(layout.rows()), 0), state_(static_cast<size_t>(layout.rows()), 0) {}

void RowOccupancy::add(const int64_t* rows, const uint64_t* keys, int64_t n) {
  const int64_t H = layout_.heads(), K = layout_.heads_per_order(), no = layout_.n_orders();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < no; ++o) {
      const uint64_t g = keys[i * no + o];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = rows[i * H + o * K + k];
        PG_CHECK(r >= 0 && r < layout_.rows(), "row ", r, " outside the table of ", layout_.rows());
        uint8_t& s = state_[static_cast<size_t>(r)];
        if (s == 0) first_[static_cast<size_t>(r)] = g, s = 1;
        else if (s == 1 && first_[static_cast<size_t>(r)] != g) s = 2;
      }
    }
}

int64_t RowOccupancy::foreign_heads(const int64_t* rows_of_position, uint64_t key, int64_t order) const {
  const int64_t K = layout_.heads_per_order();
  int64_t n = 0;
  for (int64_t k = 0; k < K; ++k) {
    const size_t r = static_cast<size_t>(rows_of_position[order * K + k]);
    n += state_[r] == 2 || (state_[r] == 1 && first_[r] != key);
  }
  return n;
}

int64_t RowOccupancy::touched_rows() const {
  int64_t n = 0;
  for (uint8_t s : state_) n += s != 0;
  return n;
}

int64_t RowOccupancy::shared_rows() const {
  int64_t n = 0;
  for (uint8_t s : state_) n += s == 2;
  return n;
}

}  // namespace pg
