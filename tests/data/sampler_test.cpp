// Window sampler (determinism, range, resume), validation windows and test stream on synthetic stores.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "tests/test_util.h"
#include "data/sampler.h"
#include "data/token_store.h"

namespace pg::data {
namespace {
namespace fs = std::filesystem;

using pg::testing::TempDir;

// A store whose id at position p is p (so a window's content reveals where it starts), in documents of 100.
TokenStore position_store(const TempDir& tmp, uint32_t n_tokens) {
  TokenStoreInfo info;
  info.vocab_size = 1u << 20;
  const uint32_t docs = (n_tokens + 99) / 100;
  const std::string path = (tmp.path / "pos.pgtok").string();
  TokenStoreWriter w(path, info, docs);
  for (uint32_t d = 0; d < docs; ++d) {
    std::vector<uint32_t> ids;
    for (uint32_t p = d * 100; p < std::min(n_tokens, (d + 1) * 100); ++p) ids.push_back(p);
    w.add_document(ids, ids.size());
  }
  w.finish();
  return TokenStore::open(path);
}

std::vector<int32_t> draw(WindowSampler& s, int64_t B) {
  std::vector<int32_t> out(B * (s.context() + 1));
  const uint64_t w = static_cast<uint64_t>(s.context()) + 1;
  for (int64_t b = 0; b < B; ++b) s.store().copy(s.next_start(), w, out.data() + b * w);
  return out;
}

TEST(WindowSampler, WindowsAreContiguousAndInRange) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 5000);
  const int64_t T = 64, B = 8;
  WindowSampler s(st, T, 42);
  for (int step = 0; step < 200; ++step) {
    auto out = draw(s, B);
    for (int64_t b = 0; b < B; ++b) {
      const int32_t* w = out.data() + b * (T + 1);
      ASSERT_GE(w[0], 0);
      ASSERT_LE(w[0] + T + 1, 5000);
      for (int64_t t = 1; t <= T; ++t) ASSERT_EQ(w[t], w[0] + t);
    }
  }
}

TEST(WindowSampler, DeterministicPerSeedAndDifferentAcrossSeeds) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 5000);
  WindowSampler a(st, 32, 7), b(st, 32, 7), c(st, 32, 8);
  auto xa = draw(a, 16), xb = draw(b, 16), xc = draw(c, 16);
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
  EXPECT_EQ(a.counter(), b.counter());
}

TEST(WindowSampler, ResumeFromSavedCounter) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 5000);
  WindowSampler a(st, 16, 3);
  draw(a, 4);
  draw(a, 4);
  const uint64_t saved = a.counter();
  auto rest = draw(a, 4);
  auto rest2 = draw(a, 4);
  WindowSampler b(st, 16, 3);
  b.set_counter(saved);
  EXPECT_EQ(draw(b, 4), rest);
  EXPECT_EQ(draw(b, 4), rest2);
}

TEST(WindowSampler, EveryStartReachableIncludingTheLast) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 20);
  const int64_t T = 16;  // starts 0..3
  WindowSampler s(st, T, 1);
  std::set<int32_t> starts;
  for (int i = 0; i < 200; ++i) starts.insert(draw(s, 1)[0]);
  EXPECT_EQ(starts, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_THROW(WindowSampler(st, 20, 1), UserError);  // 20 tokens < T+1 = 21
  EXPECT_NO_THROW(WindowSampler(st, 19, 1));
}

TEST(ValidationWindows, FixedTilingOfTheHeldoutPrefix) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 3000);
  const int64_t T = 99, val = 1050;  // 10 windows of 100; 50 tokens left unused
  ValidationWindows v(st, T, val);
  ASSERT_EQ(v.count(), 10);
  std::vector<int32_t> w(T + 1);
  for (int64_t k = 0; k < v.count(); ++k) {
    v.window(k, w.data());
    EXPECT_EQ(v.start(k), static_cast<uint64_t>(k * (T + 1)));
    for (int64_t t = 0; t <= T; ++t) ASSERT_EQ(w[t], k * (T + 1) + t);
    EXPECT_LE(v.start(k) + T + 1, static_cast<uint64_t>(val));
  }
  std::vector<int32_t> all(10 * (T + 1));
  v.windows(0, 10, all.data());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<int32_t>(i));
  ValidationWindows again(st, T, val);
  std::vector<int32_t> w2(T + 1);
  again.window(7, w2.data());
  v.window(7, w.data());
  EXPECT_EQ(w, w2);
  EXPECT_THROW(ValidationWindows(st, T, 3001), UserError);
}

TEST(TestStream, StartsAfterTheValidationTokens) {
  TempDir tmp;
  TokenStore st = position_store(tmp, 3000);
  TestStream ts(st, 1050);
  EXPECT_EQ(ts.begin(), 1050u);
  EXPECT_EQ(ts.size(), 1950u);
  std::vector<int32_t> out(10);
  ts.copy(0, 10, out.data());
  EXPECT_EQ(out[0], 1050);
  EXPECT_EQ(out[9], 1059);
  EXPECT_THROW(TestStream(st, 3001), UserError);
}

}  // namespace
}  // namespace pg::data
