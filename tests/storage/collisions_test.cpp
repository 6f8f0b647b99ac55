// Tests of storage/collisions.h on synthetic streams (occupancy variance/mean ≈ 1, empirical cross-head
// sharing ≈ (K−1)/S, S=1 ⇒ colliding n-grams share all heads), against memory/collision_stats.h, and the
// address dump.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/h5.h"
#include "core/rng.h"
#include "storage/collisions.h"
#include "memory/collision_stats.h"
#include "memory/layout.h"

namespace pg {
namespace {

EvalStream random_stream(int64_t n, uint32_t vocab, uint64_t seed, int64_t doc_len = 200) {
  RngStream r(seed, "collisions");
  std::vector<uint32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = static_cast<uint32_t>(r.below(vocab));
  std::vector<uint64_t> docs;
  for (int64_t p = 0; p < n; p += doc_len) docs.push_back(static_cast<uint64_t>(p));
  return stream_from_ids(std::move(ids), std::move(docs));
}

std::unique_ptr<MemoryLayout> layout(const std::string& name, int64_t params, int64_t slots = 4) {
  MemoryConfig m;
  m.layout = name;
  m.target_params = params;
  m.slots = slots;
  return make_layout(m, 384);
}

TEST(Collisions, IdealHashingStatistics) {
  // ~60K distinct bigrams and trigrams over ~60K rows per head: occupancy ≈ 1, plenty of colliding pairs.
  const EvalStream s = random_stream(60000, 20000, 1);
  const int64_t params = 60000LL * 16 * 64;
  for (const char* name : {"flat", "engram", "pagegram"}) {
    auto L = layout(name, std::string(name) == "flat" ? 60000LL * 2 * 384 : params);
    const LayoutCollisions c = measure_collisions(*L, s, false);
    ASSERT_EQ(c.orders.size(), 2u);
    for (const OrderCollisions& o : c.orders) {
      SCOPED_TRACE(str(name, " order ", o.order));
      EXPECT_EQ(o.positions, 60000);
      EXPECT_GT(o.distinct, 55000);
      EXPECT_NEAR(o.var_over_mean, 1.0, 0.05);
      EXPECT_NEAR(o.foreign, o.exp_foreign, 0.02);
      EXPECT_NEAR(o.neighbours / o.exp_neighbours, 1.0, 0.05);
    }
    for (const HeadCollisions& h : c.heads) EXPECT_NEAR(h.var_over_mean, 1.0, 0.06);
  }
}

TEST(Collisions, CrossHeadSharingFollowsSlots) {
  const EvalStream s = random_stream(60000, 20000, 2);
  const int64_t params = 60000LL * 16 * 64;
  double engram_nbr = 0, s4_nbr = 0;
  for (int64_t S : {1, 4, 15}) {
    auto L = layout("pagegram", params, S);
    const LayoutCollisions c = measure_collisions(*L, s, false);
    for (const OrderCollisions& o : c.orders) {
      SCOPED_TRACE(str("S=", S, " order ", o.order));
      ASSERT_GT(o.head0_pairs, 10000);
      EXPECT_NEAR(o.exp_cross_extra, 7.0 / static_cast<double>(S), 1e-12);
      if (S == 1) {  // one slot per head: n-grams sharing a page share every head
        EXPECT_EQ(o.cross_share, 1.0);
        EXPECT_EQ(o.cross_extra, 7.0);
      } else {
        EXPECT_NEAR(o.cross_extra / o.exp_cross_extra, 1.0, 0.05);
        EXPECT_NEAR(o.cross_share, o.exp_cross_share, 0.02);
      }
      if (S == 4) s4_nbr += o.neighbours;
    }
  }
  auto E = layout("engram", params);
  const LayoutCollisions e = measure_collisions(*E, s, false);
  for (const OrderCollisions& o : e.orders) {
    EXPECT_LT(o.cross_share, 0.001);  // independent heads: a second shared head is ~1/P
    EXPECT_LT(o.exp_cross_extra, 0.001);
    engram_nbr += o.neighbours;
  }
  // Report §6.2: PageGram S=4 has ≈ 0.45x the neighbours of Engram-style (S(1-(1-1/S)^K)/K = 0.45).
  EXPECT_NEAR(s4_nbr / engram_nbr, 0.45, 0.03);
}

TEST(Collisions, AgreesWithMemoryCollisionStats) {
  const EvalStream s = random_stream(8000, 300, 3, 50);  // repeated n-grams (small vocabulary), documents of 50
  for (const char* name : {"flat", "engram", "pagegram"}) {
    auto L = layout(name, 3000000);
    const LayoutCollisions c = measure_collisions(*L, s, false);
    const auto ref = collision_stats(*L, std::span<const uint32_t>(s.ids), std::span<const uint64_t>(s.doc_starts));
    ASSERT_EQ(ref.size(), c.orders.size());
    for (size_t o = 0; o < ref.size(); ++o) {
      SCOPED_TRACE(str(name, " order ", ref[o].order));
      EXPECT_EQ(c.orders[o].distinct, ref[o].distinct);
      EXPECT_NEAR(c.orders[o].mean_occupancy, ref[o].mean_occupancy, 1e-9);
      EXPECT_NEAR(c.orders[o].var_over_mean, ref[o].var_over_mean, 1e-9);
      EXPECT_NEAR(c.orders[o].foreign, ref[o].foreign, 1e-9);
      EXPECT_EQ(c.orders[o].head0_pairs, ref[o].head0_pairs);
      EXPECT_NEAR(c.orders[o].cross_share, ref[o].cross_share, 1e-12);
      EXPECT_NEAR(c.orders[o].cross_extra, ref[o].cross_mean_extra, 1e-12);
      EXPECT_NEAR(c.orders[o].neighbours, ref[o].mean_neighbours, 1e-9);
    }
  }
}

TEST(Collisions, TableAndHdf5) {
  const EvalStream s = random_stream(5000, 1000, 4);
  std::vector<LayoutCollisions> all;
  for (const char* name : {"flat", "pagegram"}) all.push_back(measure_collisions(*layout(name, 2000000), s, false));
  const std::string t = format_collision_table(all, true);
  EXPECT_NE(t.find("pagegram(S=4)"), std::string::npos);
  EXPECT_NE(t.find("Definitions"), std::string::npos);
  EXPECT_NE(t.find("Per head"), std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() / "pg_collisions_test.h5").string();
  write_collisions_h5(path, all, {{"command", "test"}});
  h5::File f = h5::File::open(path);
  const h5::Group g = f.root().sub("collisions").sub("pagegram(S=4)");
  EXPECT_EQ(g.sub("heads").read<int64_t>("head").size(), 16u);
  EXPECT_NEAR(g.sub("orders").read<double>("foreign")[0], all[1].orders[0].foreign, 0);
  std::filesystem::remove(path);
}

TEST(Addresses, DumpMatchesLayout) {
  const EvalStream s = random_stream(3000, 1000, 5);
  auto L = layout("pagegram", 5000000);
  const std::string path = (std::filesystem::temp_directory_path() / "pg_addresses_test.h5").string();
  write_addresses_h5(path, *L, s, 1000, {{"command", "test"}});
  h5::File f = h5::File::open(path);
  const h5::Group g = f.root().sub("addresses");
  std::vector<uint64_t> shape;
  const auto rows = g.read<int64_t>("rows", &shape);
  ASSERT_EQ(shape, (std::vector<uint64_t>{1000, 16}));
  const auto blocks = g.read<int64_t>("block");
  std::vector<int64_t> want(1000 * 16);
  stream_rows(*L, s, 0, 1000, want.data());
  EXPECT_EQ(rows, want);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(blocks[i], L->block_of(rows[i]).block);
  for (int64_t i = 0; i < 1000; ++i)  // all heads of one order in one block (PageGram)
    for (int64_t k = 1; k < 8; ++k) {
      EXPECT_EQ(blocks[static_cast<size_t>(i * 16 + k)], blocks[static_cast<size_t>(i * 16)]);
      EXPECT_EQ(blocks[static_cast<size_t>(i * 16 + 8 + k)], blocks[static_cast<size_t>(i * 16 + 8)]);
    }
  EXPECT_EQ(g.attr_string("layout"), "pagegram");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pg
