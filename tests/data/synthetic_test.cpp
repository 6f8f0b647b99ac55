// The synthetic dataset of `bench train --synthetic`: ids in range, the same tokens for the same seed, the sizes
// it promises, and its files gone with it.
#include "data/synthetic.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

namespace pg::data {
namespace {

TEST(Synthetic, RandomTokensAreInRangeAndSeeded) {
  std::vector<uint32_t> a(5000), b(5000), c(5000);
  RngStream ra(7, "bench.synthetic"), rb(7, "bench.synthetic"), rc(8, "bench.synthetic");
  random_tokens(ra, 50, a);
  random_tokens(rb, 50, b);
  random_tokens(rc, 50, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (uint32_t id : a) ASSERT_LT(id, 50u);
}

TEST(Synthetic, DataSetHoldsTheWindowsItPromisesAndCleansUp) {
  std::string dir;
  {
    SyntheticDataSet syn(300, 16, 1);
    const DataSet& ds = syn.dataset();
    EXPECT_EQ(ds.train->n_tokens(), uint64_t{4} << 20);
    EXPECT_EQ(ds.val_tokens, 4 * 17);
    EXPECT_GE(ds.heldout->n_tokens(), static_cast<uint64_t>(ds.val_tokens));
    EXPECT_EQ(ds.validation(16).count(), 4);
    dir = std::filesystem::path(ds.train->path()).parent_path().string();
    EXPECT_TRUE(std::filesystem::exists(dir));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace pg::data
