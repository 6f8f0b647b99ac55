// RowSpread (memory/row_spread.h): a trained table's rows placed in a larger table of the same layout, one to one,
// units kept whole (a PageGram page stays one page and one 4 KiB block), every other layout refused.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "memory/layout.h"
#include "memory/row_spread.h"

namespace pg {
namespace {

std::unique_ptr<MemoryLayout> layout(const std::string& name, int64_t params) {
  MemoryConfig m;
  m.layout = name;
  m.target_params = params;
  m.heads = 4;
  m.head_dim = 16;
  m.slots = 4;
  return make_layout(m, 64);
}

TEST(RowSpread, PlacesEveryTrainedRowOnceAndKeepsUnitsWhole) {
  for (const char* name : {"flat", "engram", "pagegram"}) {
    auto t = layout(name, 200000), l = layout(name, 7000000);
    const RowSpread s(*t, *l);
    std::set<int64_t> images;
    for (int64_t r = 0; r < t->rows(); ++r) {
      const int64_t m = s.map(r);
      ASSERT_GE(m, 0);
      ASSERT_LT(m, l->rows());
      EXPECT_TRUE(images.insert(m).second) << name << ": row " << r << " shares its image";
      EXPECT_EQ(s.inverse(m), r) << name;
    }
    int64_t placed = 0;
    for (int64_t r = 0; r < l->rows(); ++r) placed += s.inverse(r) >= 0;
    EXPECT_EQ(placed, t->rows()) << name;
    // Rows of one unit (a PageGram page: K*S rows) stay together, in one block of the large file.
    const auto seg = t->segments();
    for (const auto& g : seg)
      for (int64_t u = 0; u < g.rows / g.unit; u += 97) {
        const int64_t r0 = g.base + u * g.unit;
        for (int64_t i = 1; i < g.unit; ++i) {
          EXPECT_EQ(s.map(r0 + i), s.map(r0) + i) << name;
          EXPECT_EQ(l->block_of(s.map(r0 + i)).block, l->block_of(s.map(r0)).block) << name;
        }
      }
  }
}

TEST(RowSpread, RefusesAnotherLayoutOrASmallerTable) {
  EXPECT_THROW(RowSpread(*layout("engram", 200000), *layout("pagegram", 7000000)), UserError);
  EXPECT_THROW(RowSpread(*layout("engram", 7000000), *layout("engram", 200000)), UserError);
  MemoryConfig m;
  m.layout = "pagegram";
  m.target_params = 7000000;
  m.heads = 4;
  m.head_dim = 16;
  m.slots = 8;
  EXPECT_THROW(RowSpread(*layout("pagegram", 200000), *make_layout(m, 64)), UserError);  // pages of another size
}

}  // namespace
}  // namespace pg
