// Parameter parity across layouts (docs/model.md §3, incl. the report's 200M numbers), PageGram page/block placement,
// and collision statistics on random n-grams (docs/model.md §6): S = 1 shares every head, cross-head sharing
// ≈ (K-1)/S, occupancy variance/mean ≈ 1, neighbours PageGram(4) ≈ 0.45 x Engram-style.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/rng.h"
#include "memory/collision_stats.h"
#include "memory/engram_layout.h"
#include "memory/flat_layout.h"
#include "memory/ngram.h"
#include "memory/pagegram_layout.h"

namespace pg {
namespace {

MemoryConfig report_config(const char* layout, int64_t slots = 4) {
  MemoryConfig c;  // defaults: orders [2, 3], K 8, r 64, target 200M
  c.layout = layout;
  c.slots = slots;
  return c;
}

TEST(Parity, ReportNumbersFor200M) {
  auto flat = make_layout(report_config("flat"), 384);
  EXPECT_EQ(static_cast<FlatLayout&>(*flat).rows_per_order(), 260416);
  EXPECT_EQ(flat->rows(), 520832);
  EXPECT_EQ(flat->width(), 384);

  auto eng = make_layout(report_config("engram"), 384);
  ASSERT_EQ(eng->sizes().size(), 16u);
  std::set<int64_t> distinct(eng->sizes().begin(), eng->sizes().end());
  EXPECT_EQ(distinct.size(), 16u);
  for (int64_t p : eng->sizes()) {
    EXPECT_TRUE(memhash::is_prime(static_cast<uint64_t>(p)));
    EXPECT_NEAR(static_cast<double>(p), 195312.5, 195.3) << "each sub-table ≈195,300 rows";
  }
  EXPECT_EQ(eng->width(), 64);

  auto pg4 = make_layout(report_config("pagegram", 4), 384);
  EXPECT_EQ(pg4->sizes(), (std::vector<int64_t>{48823, 48821}));  // bigram, trigram pages
  EXPECT_EQ(pg4->rows(), (48823 + 48821) * 8 * 4);

  const ParityCheck p = check_parity(report_config("pagegram", 4), 384);
  EXPECT_EQ(p.flat, 199999488);
  EXPECT_EQ(p.pagegram, 199974912);
  EXPECT_LT(p.max_rel_diff, 1e-3) << p.report;
  for (const auto* l : {flat.get(), eng.get(), pg4.get()}) {
    EXPECT_LT(std::fabs(l->parity_deviation()), 1e-3);
    EXPECT_EQ(l->parity_report().find("exceeds"), std::string::npos) << l->parity_report();
  }
  // Every S of the report's sweep stays within 0.1% at 200M.
  for (int64_t s : {1, 4, 8, 15, 60}) {
    const ParityCheck q = check_parity(report_config("pagegram", s), 384);
    EXPECT_LT(q.max_rel_diff, 1e-3) << "S=" << s << "\n" << q.report;
  }
}

TEST(Parity, SmallTablesReportTheirDeviation) {
  MemoryConfig c = report_config("pagegram", 15);
  c.target_params = 1000000;  // 65 pages per order would be needed: one page is 0.77% of the target
  const ParityCheck p = check_parity(c, 384);
  auto l = make_layout(c, 384);
  EXPECT_GT(std::fabs(l->parity_deviation()), 1e-3);
  EXPECT_NE(l->parity_report().find("exceeds 0.1%"), std::string::npos) << l->parity_report();
  EXPECT_NE(p.report.find("exceeds 0.1%"), std::string::npos);
  EXPECT_EQ(l->sizes(), memhash::nearest_primes(1000000.0 / (2 * 8 * 15 * 64), 2));
}

TEST(PageGram, HeadRowsOfAnOrderShareOnePageAndOneBlock) {
  for (int64_t S : {4, 15}) {
    auto base = make_layout(report_config("pagegram", S), 384);
    const auto& l = static_cast<const PageGramLayout&>(*base);
    EXPECT_EQ(l.pages_per_block(), S == 4 ? 3 : 1);  // 1,088 B and 4,080 B pages
    EXPECT_EQ(l.page_bytes(), S == 4 ? 1088 : 4080);
    RngStream r(S, "test.tokens");
    std::vector<uint32_t> toks(20000);
    for (auto& t : toks) t = static_cast<uint32_t>(r.below(65536));
    const std::vector<uint64_t> docs = {0, 5000, 20000};
    Addresses a;
    a.resize(20000, l);
    compute_addresses(l, std::span<const uint32_t>(toks), std::span<const uint64_t>(docs), 0, 20000, a.rows.data(),
                      a.signs.data());
    for (int64_t i = 0; i < a.n; ++i)
      for (int64_t o = 0; o < 2; ++o) {
        const int64_t r0 = a.rows[static_cast<size_t>(i * 16 + o * 8)];
        for (int64_t k = 0; k < 8; ++k) {
          const int64_t rk = a.rows[static_cast<size_t>(i * 16 + o * 8 + k)];
          ASSERT_EQ(l.page_of(rk), l.page_of(r0));
          ASSERT_EQ(l.block_of(rk).block, l.block_of(r0).block);
          ASSERT_LE(l.block_of(rk).offset + 34, 4096);
        }
      }
  }
}

// A stream of distinct random n-grams (vocabulary 2^31, one document).
std::vector<uint32_t> random_tokens(int64_t n, uint64_t seed) {
  RngStream r(seed, "test.random_ngrams");
  std::vector<uint32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<uint32_t>(r.below(1u << 31));
  return t;
}

MemoryConfig small_config(const char* layout, int64_t slots, int64_t target) {
  MemoryConfig c = report_config(layout, slots);
  c.target_params = target;
  c.hash.seed = 3;
  return c;
}

TEST(Collisions, SlotsOneSharesEveryHead) {
  auto l = make_layout(small_config("pagegram", 1, 2 * 8 * 64 * 2003), 384);  // ~2000 pages per order
  const auto tokens = random_tokens(40000, 1);
  const std::vector<uint64_t> docs = {0};
  for (const auto& st : collision_stats(*l, tokens, docs)) {
    ASSERT_GT(st.head0_pairs, 1000);
    EXPECT_EQ(st.cross_share, 1.0);
    EXPECT_EQ(st.cross_mean_extra, 7.0);  // all K-1 other heads
  }
}

TEST(Collisions, CrossHeadSharingIsKMinusOneOverS) {
  const auto tokens = random_tokens(60000, 2);
  const std::vector<uint64_t> docs = {0};
  for (int64_t S : {4, 15}) {
    // ~12 n-grams per page: many head-0 pairs.
    const int64_t pages = 60000 / 12;
    auto l = make_layout(small_config("pagegram", S, 2 * 8 * S * 64 * pages), 384);
    for (const auto& st : collision_stats(*l, tokens, docs)) {
      const double expect = 7.0 / static_cast<double>(S);
      // Pairs are not independent across heads, so allow ~5 standard errors of a per-pair mean.
      const double se = std::sqrt(7.0 / S * (1.0 - 1.0 / S) / static_cast<double>(st.head0_pairs));
      EXPECT_NEAR(st.cross_mean_extra, expect, 5 * se + 0.005) << "S=" << S << " order " << st.order;
      EXPECT_NEAR(st.cross_share, 1.0 - std::pow(1.0 - 1.0 / S, 7), 0.03) << "S=" << S;  // S=15: 38.3%
    }
  }
  // Engram-style: independent heads, another shared head has probability Σ 1/P ≈ 7/P.
  auto e = make_layout(small_config("engram", 4, 2 * 8 * 64 * 5000), 384);
  for (const auto& st : collision_stats(*e, tokens, docs)) {
    ASSERT_GT(st.head0_pairs, 1000);
    EXPECT_LT(st.cross_mean_extra, 7.0 / 5000 * 4 + 0.002);
  }
}

TEST(Collisions, OccupancyVarianceOverMeanIsOne) {
  const auto tokens = random_tokens(40000, 3);
  const std::vector<uint64_t> docs = {0};
  const int64_t target = 2 * 8 * 64 * 10000;  // ~4 n-grams per head row
  for (auto [layout, S] : {std::pair{"engram", 4}, {"pagegram", 1}, {"pagegram", 4}, {"pagegram", 15}, {"flat", 4}}) {
    auto l = make_layout(small_config(layout, S, layout == std::string("flat") ? 2 * 384 * 10000 : target), 384);
    const double tol = layout == std::string("flat") ? 0.05 : 0.03;  // flat: one head, ~3.5x the noise
    for (const auto& st : collision_stats(*l, tokens, docs)) {
      EXPECT_EQ(st.distinct, 40000);
      EXPECT_NEAR(st.var_over_mean, 1.0, tol) << layout << " S=" << S << " order " << st.order;
      EXPECT_GT(st.foreign, 0.9);  // ≈ 1 - e^{-4}
    }
  }
}

TEST(Collisions, PageGramFourHasAboutHalfTheNeighboursOfEngram) {
  const auto tokens = random_tokens(50000, 4);
  const std::vector<uint64_t> docs = {0};
  const int64_t target = 2 * 8 * 64 * 50000;  // ~1 n-gram per head row
  auto e = make_layout(small_config("engram", 4, target), 384);
  auto p = make_layout(small_config("pagegram", 4, target), 384);
  const auto se = collision_stats(*e, tokens, docs), sp = collision_stats(*p, tokens, docs);
  for (size_t o = 0; o < se.size(); ++o) {
    // Theory: Engram ≈ K λ, PageGram(S) ≈ S λ (1 - (1 - 1/S)^K): ratio 0.45 for K = 8, S = 4 (report: ≈0.45).
    EXPECT_NEAR(sp[o].mean_neighbours / se[o].mean_neighbours, 4.0 * (1 - std::pow(0.75, 8)) / 8.0, 0.03);
    EXPECT_NEAR(sp[o].foreign, se[o].foreign, 0.01);  // single-head collisions are identical
  }
}

}  // namespace
}  // namespace pg
