// StepCollisionCounter (memory/step_collisions.h) on hand-made addresses with hand-computed answers:
// lookups, distinct n-grams, touched rows, foreign share per step (a) and per owner (b), cross-head
// co-collision, PageGram page-mates; split into micro-batches or not, the same numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "memory/pagegram_layout.h"
#include "memory/step_collisions.h"

namespace pg {
namespace {

// PageGram, one order (bigrams), K = 2 heads, S = 2 slots, width 4: 5 pages of K*S = 4 rows, 20 rows.
// row(page, head, slot) = (page*2 + head)*2 + slot.
std::unique_ptr<MemoryLayout> tiny_pagegram() {
  MemoryConfig c;
  c.layout = "pagegram";
  c.orders = {2};
  c.heads = 2;
  c.slots = 2;
  c.head_dim = 4;
  c.target_params = 80;  // 80 / (1*2*2*4) = 5 pages (a prime)
  auto l = make_layout(c, 8);
  EXPECT_EQ(l->sizes(), std::vector<int64_t>{5});
  EXPECT_EQ(l->rows(), 20);
  return l;
}
int64_t R(int64_t page, int64_t head, int64_t slot) { return (page * 2 + head) * 2 + slot; }

struct Lookup {
  uint64_t key;
  int64_t page, slot0, slot1;
};
void add(StepCollisionCounter& c, const std::vector<Lookup>& ls) {
  std::vector<int64_t> rows;
  std::vector<uint64_t> keys;
  for (const Lookup& l : ls) {
    rows.push_back(R(l.page, 0, l.slot0));
    rows.push_back(R(l.page, 1, l.slot1));
    keys.push_back(l.key);
  }
  c.add(rows.data(), keys.data(), static_cast<int64_t>(ls.size()));
}

// n-grams A..E (keys 10..50). Step 1: A, B, A, C, D, E.
//   A: page 0, slots (0, 0)   B: page 0, slots (0, 1)  -> A, B share their head-0 row only
//   C: page 1, slots (0, 0)   D: page 1, slots (0, 0)  -> C, D share both heads
//   E: page 2, slots (1, 0)
const Lookup A{10, 0, 0, 0}, B{20, 0, 0, 1}, C{30, 1, 0, 0}, D{40, 1, 0, 0}, E{50, 2, 1, 0};

TEST(StepCollisions, HandComputedStep) {
  auto layout = tiny_pagegram();
  StepCollisionCounter c(*layout, true);
  add(c, {A, B, A, C, D, E});
  const StepCollisionStats s = c.finish();
  ASSERT_EQ(s.n_orders, 1);
  ASSERT_EQ(s.heads_per_order, 2);
  EXPECT_EQ(s.lookups, std::vector<int64_t>{6});
  EXPECT_EQ(s.distinct, std::vector<int64_t>{5});
  // Head 0: rows {A,B}, {C,D}, {E}; head 1: {A}, {B}, {C,D}, {E}.
  EXPECT_EQ(s.touched_rows, (std::vector<int64_t>{3, 4}));
  EXPECT_DOUBLE_EQ(s.lookups_per_row[0], 2.0);
  EXPECT_DOUBLE_EQ(s.lookups_per_row[1], 1.5);
  // (a) head 0: A twice + B + C + D = 5 of 6 lookups on a row with another n-gram; head 1: C + D.
  EXPECT_DOUBLE_EQ(s.foreign_step[0], 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.foreign_step[1], 2.0 / 6.0);
  // Pairs sharing the head-0 row: (A,B) shares no other head, (C,D) shares head 1: mean 0.5.
  EXPECT_EQ(s.shared_pairs, (std::vector<int64_t>{2, 1}));
  EXPECT_DOUBLE_EQ(s.co_heads[0], 0.5);
  EXPECT_DOUBLE_EQ(s.co_heads[1], 1.0);
  // Owners after step 1: head-0 row of A/B -> A (2 lookups), C/D -> C (tie at 1: the first, by key), E -> E.
  // (b) head 0: the A/B and C/D rows hold a non-owner: 2 of 3 rows; head 1: the C/D row: 1 of 4.
  EXPECT_DOUBLE_EQ(s.foreign_owner[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.foreign_owner[1], 1.0 / 4.0);
  // Page-mates: A (x2), B: 1 other n-gram on page 0; C, D: 1 on page 1; E: 0  -> (2 + 1 + 1 + 1) / 6.
  EXPECT_DOUBLE_EQ(s.page_mates[0], 5.0 / 6.0);
}

TEST(StepCollisions, OwnersRunAcrossSteps) {
  auto layout = tiny_pagegram();
  StepCollisionCounter c(*layout, true);
  add(c, {A, B, A, C, D, E});
  c.finish();
  // Step 2: B, D. Totals: B 2 (ties A's 2: A keeps the head-0 row), D 2 (> C's 1: D takes the C/D rows).
  add(c, {B, D});
  const StepCollisionStats s = c.finish();
  EXPECT_EQ(s.distinct, std::vector<int64_t>{2});
  EXPECT_EQ(s.touched_rows, (std::vector<int64_t>{2, 2}));
  // (a) sees no collision within the step; (b) sees B on A's row.
  EXPECT_DOUBLE_EQ(s.foreign_step[0], 0.0);
  EXPECT_DOUBLE_EQ(s.foreign_step[1], 0.0);
  EXPECT_DOUBLE_EQ(s.foreign_owner[0], 0.5);
  EXPECT_DOUBLE_EQ(s.foreign_owner[1], 0.0);
  EXPECT_EQ(s.shared_pairs, (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(std::isnan(s.co_heads[0]));  // no pair: undefined
  EXPECT_DOUBLE_EQ(s.page_mates[0], 0.0);
  // Step 3 (not reported: owners still counted): B twice -> B 4 > A 2 takes the head-0 row.
  add(c, {B, B});
  EXPECT_TRUE(c.finish(false).lookups.empty());
  add(c, {B});
  EXPECT_DOUBLE_EQ(c.finish().foreign_owner[0], 0.0);
  EXPECT_GT(c.owner_bytes(), 0);
}

TEST(StepCollisions, MicroBatchSplitAndUntrackedOwners) {
  auto layout = tiny_pagegram();
  StepCollisionCounter one(*layout, true), split(*layout, true), untracked(*layout, false);
  add(one, {A, B, A, C, D, E});
  add(split, {A, B});
  add(split, {A, C, D, E});
  add(untracked, {A, B, A, C, D, E});
  const StepCollisionStats a = one.finish(), b = split.finish(), u = untracked.finish();
  EXPECT_EQ(a.touched_rows, b.touched_rows);
  EXPECT_EQ(a.foreign_step, b.foreign_step);
  EXPECT_EQ(a.foreign_owner, b.foreign_owner);
  EXPECT_EQ(a.co_heads, b.co_heads);
  EXPECT_EQ(a.page_mates, b.page_mates);
  EXPECT_EQ(a.foreign_step, u.foreign_step);
  EXPECT_TRUE(std::isnan(u.foreign_owner[0]) && std::isnan(u.foreign_owner[1]));
  EXPECT_EQ(untracked.owner_bytes(), 0);
}

TEST(StepCollisions, FlatHasNoCoHeadsOrPages) {
  MemoryConfig c;
  c.layout = "flat";
  c.orders = {2, 3};
  c.target_params = 2 * 10 * 8;  // 10 rows of width 8 per order
  auto l = make_layout(c, 8);
  ASSERT_EQ(l->heads(), 2);
  StepCollisionCounter s(*l, true);
  // Position 0, 1: the same bigram row 3 (different bigrams), trigram rows 12 and 15.
  const std::vector<int64_t> rows{3, 12, 3, 15, 4, 12};
  const std::vector<uint64_t> keys{1, 100, 2, 200, 3, 100};
  s.add(rows.data(), keys.data(), 3);
  const StepCollisionStats st = s.finish();
  EXPECT_EQ(st.distinct, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(st.touched_rows, (std::vector<int64_t>{2, 2}));
  EXPECT_DOUBLE_EQ(st.foreign_step[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(st.foreign_step[1], 0.0);
  EXPECT_EQ(st.shared_pairs, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(std::isnan(st.co_heads[0]));
  EXPECT_TRUE(std::isnan(st.page_mates[0]));
}

TEST(StepCollisions, WindowKeysMatchNgramKeys) {
  auto layout = tiny_pagegram();
  const std::vector<uint32_t> tokens{5, 6, 7, 8, 9, 10, 11};
  const std::vector<uint64_t> docs{0, 3};  // documents [0, 3), [3, 7)
  const std::vector<int64_t> starts{1, 2};
  std::vector<uint64_t> keys;
  compute_window_ngram_keys(*layout, std::span<const uint32_t>(tokens), docs, starts, 3, keys);
  ASSERT_EQ(keys.size(), 6u);
  // Window 1, position 3 (a document start): bigram (boundary, 8).
  const uint64_t ctx[2] = {8, memhash::kBoundaryToken};
  EXPECT_EQ(keys[2], memhash::ngram_key(ctx, 2));
  EXPECT_EQ(keys[1], keys[3]);  // position 2 in both windows
  EXPECT_EQ(keys[2], keys[4]);  // position 3 in both windows
  const uint64_t ctx2[2] = {7, 6};
  EXPECT_EQ(keys[1 * 3 + 0], memhash::ngram_key(ctx2, 2));  // window 2 starts at position 2: (6, 7)
}

}  // namespace
}  // namespace pg
