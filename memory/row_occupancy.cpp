// Implementation of memory/row_occupancy.h.
#include "memory/row_occupancy.h"

#include "core/error.h"

namespace pg {

RowOccupancy::RowOccupancy(const MemoryLayout& layout)
    : layout_(layout),
      first_(static_cast<size_t>(layout.rows()), 0),
      state_(static_cast<size_t>(layout.rows()), 0),
      owner_(static_cast<size_t>(layout.rows()), 0),
      owner_count_(static_cast<size_t>(layout.rows()), 0),
      count_(static_cast<size_t>(layout.n_orders())) {}

void RowOccupancy::add(const int64_t* rows, const uint64_t* keys, int64_t n) {
  const int64_t H = layout_.heads(), K = layout_.heads_per_order(), no = layout_.n_orders();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < no; ++o) {
      const uint64_t g = keys[i * no + o];
      const uint32_t total = ++count_[static_cast<size_t>(o)][g];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = rows[i * H + o * K + k];
        PG_CHECK(r >= 0 && r < layout_.rows(), "row ", r, " outside the table of ", layout_.rows());
        const size_t ri = static_cast<size_t>(r);
        uint8_t& s = state_[ri];
        if (s == 0) first_[ri] = g, s = 1;
        else if (s == 1 && first_[ri] != g) s = 2;
        if (owner_count_[ri] > 0 && owner_[ri] == g) owner_count_[ri] = total;
        else if (total > owner_count_[ri]) owner_[ri] = g, owner_count_[ri] = total;
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

int64_t RowOccupancy::non_owner_heads(const int64_t* rows_of_position, uint64_t key, int64_t order) const {
  const int64_t K = layout_.heads_per_order();
  int64_t n = 0;
  for (int64_t k = 0; k < K; ++k) {
    const size_t r = static_cast<size_t>(rows_of_position[order * K + k]);
    n += owner_count_[r] > 0 && owner_[r] != key;
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
