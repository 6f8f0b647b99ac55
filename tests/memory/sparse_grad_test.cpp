// Sparse gradient path of the table beyond the per-layout conformance suite: the step accumulator over several
// micro-batches (its buffer-taking first add and its merging later adds, over two steps) against the dense
// scatter-add, and the radix-sort path against the std::sort path (rows beyond 32 bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "memory/sparse_grad.h"

namespace pg {
namespace {

// A synthetic micro-batch: n positions x heads rows drawn from [0, rows) (many repeats), random signs.
Addresses random_addresses(int64_t n, int64_t heads, int64_t width, int64_t rows, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Addresses a;
  a.n = n;
  a.heads = heads;
  a.sign_words = (width + 63) / 64;
  a.rows.resize(static_cast<size_t>(n * heads));
  a.signs.resize(static_cast<size_t>(n * heads * a.sign_words));
  std::uniform_int_distribution<int64_t> row(0, rows - 1);
  for (auto& r : a.rows) r = row(gen);
  for (auto& s : a.signs) s = gen();
  return a;
}

std::vector<float> random_values(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(gen);
  return v;
}

TEST(SparseGradAccumulator, MicroBatchesOfTwoStepsEqualTheDenseScatterAdd) {
  const int64_t rows = 97, width = 70, heads = 3, n = 40;  // width spans two sign words
  SparseGrad g;
  SparseGradScratch scratch;
  SparseGradAccumulator acc(rows, width);
  for (int step = 0; step < 2; ++step) {
    std::vector<float> dense(static_cast<size_t>(rows * width), 0.0f);
    for (int mb = 0; mb < 3; ++mb) {
      const uint64_t seed = static_cast<uint64_t>(10 * step + mb);
      const Addresses a = random_addresses(n, heads, width, rows, seed);
      const auto dout = random_values(n * heads * width, seed + 100);
      sparse_grad(a, dout.data(), width, false, g, scratch);
      acc.add(g);
      std::vector<float> mb_dense(dense.size(), 0.0f);
      dense_grad_reference(a, dout.data(), width, false, mb_dense.data());
      for (size_t i = 0; i < dense.size(); ++i) dense[i] += mb_dense[i];
    }
    std::vector<float> from_acc(dense.size(), 0.0f);
    std::vector<bool> seen(static_cast<size_t>(rows), false);
    for (int64_t u = 0; u < acc.touched(); ++u) {
      const int64_t r = acc.rows()[static_cast<size_t>(u)];
      ASSERT_FALSE(seen[static_cast<size_t>(r)]) << "row " << r << " twice";
      seen[static_cast<size_t>(r)] = true;
      std::memcpy(from_acc.data() + r * width, acc.values() + u * width, sizeof(float) * width);
    }
    for (int64_t r = 0; r < rows; ++r) {
      bool nz = false;
      for (int64_t j = 0; j < width; ++j) nz |= dense[static_cast<size_t>(r * width + j)] != 0.0f;
      EXPECT_TRUE(!nz || seen[static_cast<size_t>(r)]) << "step " << step << ": row " << r << " lost";
    }
    // A row sums its entries within a micro-batch in entry order, then the micro-batches in order: exact.
    for (size_t i = 0; i < dense.size(); ++i) ASSERT_EQ(from_acc[i], dense[i]) << "step " << step << ", element " << i;
    acc.clear();
    EXPECT_EQ(acc.touched(), 0);
  }
}

// rows_below: rows in [row0, row0 + rows_below); row0 near 2^32 - 1 makes the radix sort take all three passes.
void expect_radix_equals_wide_path(int64_t row0, int64_t rows_below) {
  const int64_t width = 64, heads = 4, n = 500;
  Addresses a = random_addresses(n, heads, width, rows_below, 7);
  for (auto& r : a.rows) r += row0;
  Addresses wide = a;  // the same order of rows, beyond 32 bits: sorted with std::sort of (row, entry) pairs
  const int64_t shift = int64_t{1} << 33;
  for (auto& r : wide.rows) r += shift;
  const auto dout = random_values(n * heads * width, 8);
  SparseGrad g, gw;
  SparseGradScratch s1, s2;
  sparse_grad(a, dout.data(), width, false, g, s1);
  sparse_grad(wide, dout.data(), width, false, gw, s2);
  ASSERT_EQ(g.size(), gw.size()) << "rows from " << row0;
  ASSERT_TRUE(std::is_sorted(g.rows.begin(), g.rows.end()));
  for (int64_t u = 0; u < g.size(); ++u)
    ASSERT_EQ(g.rows[static_cast<size_t>(u)] + shift, gw.rows[static_cast<size_t>(u)]);
  ASSERT_EQ(g.values.size(), gw.values.size());
  EXPECT_EQ(0, std::memcmp(g.values.data(), gw.values.data(), g.values.size() * sizeof(float)));
}

TEST(SparseGrad, RadixSortPathEqualsTheWideRowPath) {
  expect_radix_equals_wide_path(0, 300);  // one radix pass
  expect_radix_equals_wide_path(int64_t{UINT32_MAX} - 299, 300);  // three passes, rows up to 2^32 - 1
  expect_radix_equals_wide_path(int64_t{1} << 20, int64_t{1} << 21);  // two passes, few repeats
}

}  // namespace
}  // namespace pg
