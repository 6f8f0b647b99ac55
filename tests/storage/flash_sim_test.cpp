// Tests of storage/flash_sim.h: the LRU simulator against a brute-force reference ("LRU simulator =
// brute-force reference"), per-token block streams of each layout, and the sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/rng.h"
#include "storage/flash_sim.h"
#include "memory/layout.h"
#include "memory/pagegram_layout.h"

namespace pg {
namespace {

// Brute-force LRU: a recency vector (front = most recent), linear search, O(capacity) per access.
struct ReferenceLru {
  int64_t capacity;
  std::vector<uint32_t> order;
  int64_t misses = 0;
  void access(uint32_t b) {
    auto it = std::find(order.begin(), order.end(), b);
    if (it != order.end()) {
      order.erase(it);
    } else {
      ++misses;
      if (capacity == 0) return;
      if (static_cast<int64_t>(order.size()) == capacity) order.pop_back();
    }
    order.insert(order.begin(), b);
  }
};

std::vector<uint32_t> random_stream(uint64_t seed, int64_t n, int64_t universe, bool skewed) {
  RngStream r(seed, "lru-test");
  std::vector<uint32_t> s(static_cast<size_t>(n));
  for (auto& x : s) {
    if (skewed) {  // Zipf-like ranks, scrambled
      const double u = r.uniform();
      const int64_t k =
          std::min<int64_t>(universe - 1, static_cast<int64_t>(std::exp(u * std::log(universe + 1.0))) - 1);
      x = static_cast<uint32_t>(mix64(static_cast<uint64_t>(k) + seed) % static_cast<uint64_t>(universe));
    } else {
      x = static_cast<uint32_t>(r.below(static_cast<uint64_t>(universe)));
    }
  }
  return s;
}

TEST(FlashCacheSimulator, MatchesBruteForceReference) {
  for (bool skewed : {false, true})
    for (int64_t universe : {1, 5, 64, 1000})
      for (int64_t cap : {0, 1, 2, 3, 7, 50, 999, 1000, 5000}) {
        const auto s = random_stream(static_cast<uint64_t>(universe * 131 + cap), 20000, universe, skewed);
        ReferenceLru ref{std::min(cap, universe), {}, 0};
        // Small log slack: compaction runs many times.
        FlashCacheSimulator sim(universe, cap, 3);
        RngStream r(7, "chunks");
        size_t i = 0;
        while (i < s.size()) {  // feed in random chunk sizes
          const size_t m = std::min(s.size() - i, static_cast<size_t>(r.below(300)));
          const int64_t before = ref.misses;
          for (size_t j = i; j < i + m; ++j) ref.access(s[j]);
          EXPECT_EQ(sim.access(std::span<const uint32_t>(s.data() + i, m)), ref.misses - before);
          i += m;
        }
        SCOPED_TRACE(str("universe ", universe, " cap ", cap, " skewed ", skewed));
        EXPECT_EQ(sim.misses(), ref.misses);
        EXPECT_EQ(sim.accesses(), static_cast<int64_t>(s.size()));
        if (cap > 0) {
          EXPECT_EQ(sim.mru_order(), ref.order);
        }
        for (uint32_t b = 0; b < static_cast<uint32_t>(universe); ++b)
          EXPECT_EQ(sim.contains(b), std::find(ref.order.begin(), ref.order.end(), b) != ref.order.end());
      }
}

TEST(FlashCacheSimulator, EdgeCases) {
  FlashCacheSimulator none(10, 0);
  const std::vector<uint32_t> s = {1, 1, 1, 2};
  EXPECT_EQ(none.access(s), 4);  // no cache: every access is a read
  FlashCacheSimulator one(10, 1);
  EXPECT_EQ(one.access(s), 2);
  EXPECT_EQ(one.mru_order(), std::vector<uint32_t>{2});
  FlashCacheSimulator big(10, 1000);  // larger than the table: only cold misses
  EXPECT_EQ(big.capacity(), 10);
  const std::vector<uint32_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 0};
  EXPECT_EQ(big.access(all), 10);
  big.reset();
  EXPECT_EQ(big.misses(), 0);
  EXPECT_EQ(big.size(), 0);
  EXPECT_FALSE(big.contains(3));
  const std::vector<uint32_t> bad = {10};
  EXPECT_THROW(big.access(bad), InternalError);
}

MemoryConfig small_config(const std::string& layout, int64_t params, int64_t slots = 4) {
  MemoryConfig m;
  m.layout = layout;
  m.target_params = params;
  m.slots = slots;
  return m;
}

EvalStream synthetic_stream(int64_t n, uint32_t vocab, uint64_t seed) {
  RngStream r(seed, "stream");
  std::vector<uint32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = static_cast<uint32_t>(r.below(vocab));
  std::vector<uint64_t> docs;
  for (int64_t p = 0; p < n; p += 97) docs.push_back(static_cast<uint64_t>(p));
  return stream_from_ids(std::move(ids), std::move(docs));
}

TEST(StreamBlocks, BlocksPerTokenByLayout) {
  const EvalStream s = synthetic_stream(5000, 3000, 1);
  const int64_t params = 400000000;  // large enough that blocks rarely coincide
  for (const char* name : {"flat", "engram", "pagegram"}) {
    auto L = make_layout(small_config(name, params), 384);
    std::vector<uint32_t> blocks;
    std::vector<uint64_t> ends;
    stream_blocks(*L, s, 0, s.size(), blocks, &ends);
    ASSERT_EQ(static_cast<int64_t>(ends.size()), s.size());
    uint64_t start = 0;
    int64_t total = 0;
    for (uint64_t e : ends) {
      std::set<uint32_t> u(blocks.begin() + static_cast<int64_t>(start), blocks.begin() + static_cast<int64_t>(e));
      EXPECT_EQ(u.size(), e - start) << "a token's blocks are distinct";
      for (uint32_t b : u) EXPECT_LT(b, static_cast<uint64_t>(L->num_blocks()));
      total += static_cast<int64_t>(e - start);
      start = e;
    }
    const double per_token = static_cast<double>(total) / static_cast<double>(s.size());
    if (std::string(name) == "engram") {
      EXPECT_GT(per_token, 15.9);
      EXPECT_LE(per_token, 16.0);
    } else {
      EXPECT_EQ(per_token, 2.0) << name;  // one block per order: a PageGram page never straddles a block
    }
  }
}

TEST(StreamBlocks, PageNeverStraddlesBlock) {
  for (int64_t S : {1, 4, 8, 15}) {
    auto L = make_layout(small_config("pagegram", 5000000, S), 384);
    const auto& P = dynamic_cast<const PageGramLayout&>(*L);
    for (int64_t page = 0; page < L->rows() / P.page_rows(); page += 7) {
      const BlockLocation a = L->block_of(page * P.page_rows());
      const BlockLocation b = L->block_of((page + 1) * P.page_rows() - 1);
      EXPECT_EQ(a.block, b.block);
      EXPECT_LE(b.offset + L->nf4_bytes_per_row(), kBlockBytes);
    }
  }
}

TEST(FlashSweep, AgreesWithReferenceAndLimits) {
  const EvalStream s = synthetic_stream(3000, 500, 2);
  FlashSweepConfig cfg;
  cfg.d_model = 384;
  cfg.layouts = {parse_flash_layout("flat", 4), parse_flash_layout("engram", 4), parse_flash_layout("pagegram:15", 4)};
  cfg.sizes = {2e6, 8e6};
  cfg.caches = {0, 8 * kBlockBytes, 64 * kBlockBytes, int64_t{1} << 40};
  cfg.chunk_tokens = 333;
  cfg.progress = false;
  const FlashSweepSummary sum = run_flash_sweep(cfg, s);
  ASSERT_EQ(sum.results.size(), 3u * 2u * 4u);
  for (const FlashResult& r : sum.results) {
    const auto spec = parse_flash_layout(r.layout == "pagegram(S=15)" ? "pagegram:15" : r.layout, 4);
    MemoryConfig m = small_config(spec.layout, static_cast<int64_t>(r.target_params), spec.slots ? spec.slots : 4);
    auto L = make_layout(m, 384);
    std::vector<uint32_t> blocks;
    stream_blocks(*L, s, 0, s.size(), blocks);
    ReferenceLru ref{std::min<int64_t>(r.cache_blocks, L->num_blocks()), {}, 0};
    for (uint32_t b : blocks) ref.access(b);
    EXPECT_EQ(r.misses, ref.misses) << r.layout << " " << r.target_params << " " << r.cache_bytes;
    EXPECT_EQ(r.accesses, static_cast<int64_t>(blocks.size()));
    EXPECT_EQ(r.tokens, s.size());
    if (r.cache_bytes == 0) {
      EXPECT_EQ(r.misses, r.accesses);
    }
    if (r.cache_bytes == int64_t{1} << 40) {  // the whole table fits: only first touches miss
      EXPECT_EQ(r.misses, static_cast<int64_t>(std::set<uint32_t>(blocks.begin(), blocks.end()).size()));
    }
  }
  const std::string table = format_flash_table(sum);
  EXPECT_NE(table.find("pagegram(S=15)"), std::string::npos);
  EXPECT_NE(table.find("Definitions"), std::string::npos);
}

// `flashsim --sizes 1e15` (the largest count parse_count takes) used to reach an internal check: a table
// whose blocks do not fit the simulator's 32-bit block ids is refused as bad input before anything is allocated.
TEST(FlashSweep, RefusesTablesTooLargeToSimulate) {
  const EvalStream s = synthetic_stream(300, 500, 2);
  FlashSweepConfig cfg;
  cfg.d_model = 384;
  cfg.layouts = {parse_flash_layout("engram", 4)};
  cfg.caches = {0};
  cfg.progress = false;
  for (double size : {1e15, 1e14}) {
    cfg.sizes = {size};
    try {
      run_flash_sweep(cfg, s);
      ADD_FAILURE() << "size " << size << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--sizes"), std::string::npos) << e.what();
    }
  }
  cfg.sizes = {20e9};  // the report's largest table still simulates
  EXPECT_EQ(run_flash_sweep(cfg, s).results.size(), 1u);
}

TEST(FlashSweep, ParsesArguments) {
  EXPECT_EQ(parse_count("3.2e9", "x"), 3.2e9);
  EXPECT_EQ(parse_count("20B", "x"), 20e9);
  EXPECT_EQ(parse_count("200M", "x"), 200e6);
  EXPECT_THROW(parse_count("abc", "x"), UserError);
  EXPECT_THROW(parse_count("3Q", "x"), UserError);
  EXPECT_EQ(parse_bytes("0", "x"), 0);
  EXPECT_EQ(parse_bytes("256MiB", "x"), int64_t{256} << 20);
  EXPECT_EQ(parse_bytes("1GiB", "x"), int64_t{1} << 30);
  EXPECT_EQ(parse_bytes("4096", "x"), 4096);
  EXPECT_THROW(parse_bytes("1 parsec", "x"), UserError);
  EXPECT_THROW(parse_bytes("-5", "x"), UserError);
  EXPECT_EQ(format_bytes(int64_t{1} << 30), "1 GiB");
  EXPECT_THROW(parse_flash_layout("btree", 4), UserError);
  EXPECT_THROW(parse_flash_layout("flat:3", 4), UserError);
  EXPECT_THROW(parse_flash_layout("pagegram:x", 4), UserError);
  EXPECT_EQ(parse_flash_layout("pagegram", 4).label(), "pagegram(S=4)");
  EXPECT_EQ(parse_flash_layout("pagegram:15", 4).slots, 15);
  EXPECT_THROW(parse_flash_layout("pagegram:0", 4), UserError);  // memory.slots' range [1, 4096]
  EXPECT_THROW(parse_flash_layout("pagegram:4097", 4), UserError);
}

}  // namespace
}  // namespace pg
