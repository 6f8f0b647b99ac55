// The HDF5 columns of the storage tools are described once (their row types' columns()) and documented in
// storage/FORMATS.md: every column a tool writes is named there, and write_rows writes exactly those columns.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "core/h5.h"
#include "core/text.h"
#include "storage/collisions.h"
#include "storage/flash_sim.h"
#include "storage/iobench.h"

namespace pg {
namespace {

struct Names {
  std::vector<std::string> all, numbers, texts;  // numbers include derived columns (const methods)
  template <class Row, class F>
  void operator()(const char* name, F Row::*) {
    all.push_back(name);
    (std::is_same_v<F, std::string> ? texts : numbers).push_back(name);
  }
};

template <class Row>
Names names_of() {
  Names n;
  Row::columns(n);
  return n;
}

TEST(StorageFormats, EveryColumnIsDocumented) {
  const std::string doc = read_file(std::string(PG_SOURCE_DIR) + "/storage/FORMATS.md");
  auto check = [&](const Names& n, const char* row) {
    EXPECT_FALSE(n.all.empty()) << row;
    std::set<std::string> seen;
    for (const auto& c : n.all) {
      EXPECT_TRUE(seen.insert(c).second) << row << ": column '" << c << "' listed twice";
      EXPECT_NE(doc.find("`" + c + "`"), std::string::npos) << row << ": column '" << c << "' is not in FORMATS.md";
    }
  };
  check(names_of<FlashResult>(), "FlashResult");
  check(names_of<IoBenchResult>(), "IoBenchResult");
  check(names_of<OrderCollisions>(), "OrderCollisions");
  check(names_of<HeadCollisions>(), "HeadCollisions");
}

TEST(StorageFormats, WriteRowsWritesTheListedColumns) {
  std::vector<IoBenchResult> rows(3);
  for (int i = 0; i < 3; ++i) {
    rows[i].layout = i == 1 ? "engram" : "pagegram(S=4)";
    rows[i].depth = 1 << i;
    rows[i].lookups = 100 + i;
    rows[i].reads = 200 + i;
    rows[i].seconds = 0.5 * (i + 1);
    rows[i].read_p99_us = 7.25 * i;
  }
  const std::string path = str(PG_BINARY_DIR, "/formats_doc_test_", getpid(), ".h5");
  h5::write_atomic(path, [&](const h5::Group& root) { root.create("t").write_rows(rows); });
  const h5::File f = h5::File::open(path);
  const h5::Group g = f.root().sub("t");
  const Names n = names_of<IoBenchResult>();
  std::vector<std::string> children = g.children();
  std::set<std::string> datasets(children.begin(), children.end());
  std::set<std::string> expect(n.numbers.begin(), n.numbers.end());
  EXPECT_EQ(datasets, expect);
  EXPECT_EQ(g.attr_string("layouts"), "pagegram(S=4),engram,pagegram(S=4)");
  EXPECT_EQ(g.read<int64_t>("depth"), (std::vector<int64_t>{1, 2, 4}));  // int members are written as int64
  EXPECT_EQ(g.read<int64_t>("reads"), (std::vector<int64_t>{200, 201, 202}));
  EXPECT_EQ(g.read<double>("read_p99_us"), (std::vector<double>{0, 7.25, 14.5}));
  EXPECT_EQ(g.read<double>("lookups_per_second"), (std::vector<double>{100 / 0.5, 101 / 1.0, 102 / 1.5}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pg
