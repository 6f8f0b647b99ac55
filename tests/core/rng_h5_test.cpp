// RNG streams (deterministic, independent, golden values) and the HDF5 wrapper (round trip, errors).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/h5.h"
#include "core/rng.h"
#include "tests/test_util.h"

namespace pg {
namespace {

TEST(Rng, DeterministicAndIndependent) {
  RngStream a(7, "backbone.init"), b(7, "backbone.init"), c(7, "data.order"), d(8, "backbone.init");
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, d.next_u64());
  }
  // Using stream c never changes stream a's values: a value is a function of (seed, name, counter).
  RngStream a2(7, "backbone.init");
  for (int i = 0; i < 1000; ++i) c.next_u64();
  EXPECT_EQ(a2.at(5), RngStream(7, "backbone.init").at(5));
  EXPECT_NE(RngStream(7, "x").child("a").at(0), RngStream(7, "x").child("b").at(0));
}

TEST(Rng, GoldenValues) {
  // Pinned: stream values are part of the reproducibility contract (changing them changes every run).
  EXPECT_EQ(mix64(0), 0ull);
  EXPECT_EQ(mix64(1), 0x5692161d100b05e5ull);
  EXPECT_EQ(RngStream(0, "backbone.init").at(0), 0xa6416d28e2f1fb7full);
  EXPECT_EQ(RngStream(12345, "data.order").at(99), 0x3f047cd8f6694d39ull);
}

TEST(Rng, Distributions) {
  RngStream r(1, "dist");
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = r.normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(7), 7u);
  double u = 0;
  for (int i = 0; i < n; ++i) u += r.uniform();
  EXPECT_NEAR(u / n, 0.5, 0.005);
}

TEST(H5, RoundTripAndErrors) {
  pg::testing::TempDir tmp;
  const auto& dir = tmp.path;
  const std::string path = (dir / "t.h5").string();
  std::vector<float> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
  h5::write_atomic(path, [&](const h5::Group& g) {
    h5::Group p = g.create("params");
    p.write<float>("w", std::span<const float>(data), {100, 100});
    g.set_attr("config", std::string("model: {layers: 2}"));
    g.set_attr("step", int64_t{42});
    g.set_attr("lr", 0.125);
  });
  EXPECT_FALSE(std::filesystem::exists(h5::temp_name(path)));
  {
    h5::File f = h5::File::open(path);
    h5::Group r = f.root();
    EXPECT_EQ(r.attr_string("config"), "model: {layers: 2}");
    EXPECT_EQ(r.attr_int("step"), 42);
    EXPECT_EQ(r.attr_double("lr"), 0.125);
    std::vector<uint64_t> shape;
    auto back = r.sub("params").read<float>("w", &shape);
    EXPECT_EQ(shape, (std::vector<uint64_t>{100, 100}));
    EXPECT_EQ(back, data);
    std::vector<float> buf(10000);
    EXPECT_THROW(r.sub("params").read_into<float>("w", buf, {10, 1000}), IoError);
    EXPECT_THROW(r.sub("missing"), IoError);
  }
  // Truncated file: refused with an IoError, not a crash.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_THROW(
      {
        h5::File f = h5::File::open(path);
        f.root().sub("params").read<float>("w");
      },
      IoError);
  std::ofstream(dir / "not.h5") << "hello";
  EXPECT_THROW(h5::File::open((dir / "not.h5").string()), IoError);
}

// Datasets written in slabs (a sharded table's rows, each owner's in turn) read back whole and in other slabs; a file
// expected to be large is written to disk as it is filled (the same content), after a check of the disk's room.
TEST(H5, SlabsAndStreamedFiles) {
  pg::testing::TempDir tmp;
  std::vector<float> data(3000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) - 7.25f;
  for (const int64_t expected : {int64_t{0}, h5::File::kStreamedBytes}) {
    const std::string path = (tmp.path / ("s" + std::to_string(expected) + ".h5")).string();
    h5::write_atomic(
        path,
        [&](const h5::Group& g) {
          g.create_dataset<float>("t", {1000, 3});
          for (const auto& [r0, n] : {std::pair<uint64_t, size_t>{700, 300}, {0, 450}, {450, 250}})
            g.write_slab<float>("t", r0, std::span<const float>(data.data() + r0 * 3, n * 3));
        },
        expected);
    h5::File f = h5::File::open(path);
    EXPECT_EQ(f.root().read<float>("t"), data) << expected;
    std::vector<float> part(6);
    f.root().read_slab<float>("t", 998, std::span<float>(part));
    EXPECT_EQ(part, std::vector<float>(data.end() - 6, data.end()));
    EXPECT_THROW(f.root().read_slab<float>("t", 999, std::span<float>(part)), std::exception);  // past the end
  }
  // A file larger than the disk has room for is refused before anything is written.
  const std::string huge = (tmp.path / "huge.h5").string();
  try {
    h5::write_atomic(
        huge, [](const h5::Group&) {}, int64_t{1} << 60);
    FAIL() << "a 1 EiB file was not refused";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(huge));
  EXPECT_FALSE(std::filesystem::exists(h5::temp_name(huge)));
}

}  // namespace
}  // namespace pg
