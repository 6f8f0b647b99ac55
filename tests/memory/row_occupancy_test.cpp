// RowOccupancy (memory/row_occupancy.h): which rows received another n-gram, per head, on hand-made addresses.
#include <gtest/gtest.h>

#include <vector>

#include "memory/layout.h"
#include "memory/row_occupancy.h"

namespace pg {
namespace {

TEST(RowOccupancy, CountsHeadsWhoseRowHoldsAnotherNgram) {
  MemoryConfig m;
  m.layout = "engram";
  m.orders = {2, 3};
  m.heads = 4;
  m.head_dim = 8;
  m.target_params = 100000;
  auto L = make_layout(m, 64);
  const int64_t H = L->heads(), K = L->heads_per_order();
  ASSERT_EQ(K, 4);
  ASSERT_EQ(H, 8);
  // Position p: head (o, k) reads row base(o, k) + p; one key per order.
  auto rows_of = [&](int64_t p) {
    std::vector<int64_t> r(static_cast<size_t>(H));
    for (int64_t h = 0; h < H; ++h) r[h] = L->rows() / H * h + p;
    return r;
  };
  RowOccupancy occ(*L);
  EXPECT_EQ(occ.touched_rows(), 0);
  std::vector<int64_t> r0 = rows_of(0);
  const uint64_t a2 = 11, a3 = 12, b2 = 21;
  // An untouched row is never foreign.
  EXPECT_EQ(occ.foreign_heads(r0.data(), a2, 0), 0);
  std::vector<uint64_t> keys = {a2, a3};
  occ.add(r0.data(), keys.data(), 1);
  EXPECT_EQ(occ.touched_rows(), H);
  EXPECT_EQ(occ.shared_rows(), 0);
  EXPECT_EQ(occ.foreign_heads(r0.data(), a2, 0), 0);  // its own rows
  EXPECT_EQ(occ.foreign_heads(r0.data(), a3, 1), 0);
  EXPECT_EQ(occ.foreign_heads(r0.data(), b2, 0), K);  // every row holds a2
  // b2 lands in head (0, 1)'s row of a2 only (the other heads elsewhere): a2 now has one foreign head.
  std::vector<int64_t> rb = rows_of(5);
  rb[1] = r0[1];
  keys = {b2, a3};
  occ.add(rb.data(), keys.data(), 1);
  EXPECT_EQ(occ.shared_rows(), 1);
  EXPECT_EQ(occ.foreign_heads(r0.data(), a2, 0), 1);
  EXPECT_EQ(occ.foreign_heads(rb.data(), b2, 0), 1);
  EXPECT_EQ(occ.foreign_heads(r0.data(), a3, 1), 0);  // order 3 rows still hold a3 alone (rb's are elsewhere)
  // The same n-gram again changes nothing.
  keys = {a2, a3};
  occ.add(r0.data(), keys.data(), 1);
  EXPECT_EQ(occ.shared_rows(), 1);
  EXPECT_EQ(occ.foreign_heads(r0.data(), a2, 0), 1);
  // Owners: a2 was trained twice into head (0, 1)'s row, b2 once: a2 owns it; b2 owns its other rows.
  EXPECT_EQ(occ.non_owner_heads(r0.data(), a2, 0), 0);
  EXPECT_EQ(occ.non_owner_heads(rb.data(), b2, 0), 1);
  // Two more b2 lookups take the shared row over (3 > 2); a tie would keep the earlier owner.
  keys = {b2, a3};
  occ.add(rb.data(), keys.data(), 1);
  EXPECT_EQ(occ.non_owner_heads(r0.data(), a2, 0), 0);  // 2 vs 2: a2 keeps it
  occ.add(rb.data(), keys.data(), 1);
  EXPECT_EQ(occ.non_owner_heads(r0.data(), a2, 0), 1);
  EXPECT_EQ(occ.non_owner_heads(rb.data(), b2, 0), 0);
  EXPECT_EQ(occ.non_owner_heads(r0.data(), b2, 0), K - 1);  // a2 owns the other three of a2's rows
}

}  // namespace
}  // namespace pg
